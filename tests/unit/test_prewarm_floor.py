"""The worker-process set-up hook's environment (raylab/frameworks/prewarm.py) and the saved start-up floor
(raylab/probes/floor.py)."""

from __future__ import annotations

import sys
import time

from ray._private import ray_constants

from raylab.frameworks import prewarm
from raylab.probes import floor

HOOK = ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR


def test_each_framework_gets_the_hook_and_its_imports(monkeypatch):
    monkeypatch.delenv(HOOK, raising=False)
    monkeypatch.delenv(prewarm.ENV_IMPORTS, raising=False)
    env = prewarm.runtime_env("tf")["env_vars"]
    assert env[HOOK] == "raylab.frameworks.prewarm.start" and env[prewarm.ENV_IMPORTS] == "tensorflow,keras"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "2"
    xla = prewarm.runtime_env("xla", {"PJRT_DEVICE": "CPU"})["env_vars"]
    assert xla[prewarm.ENV_IMPORTS].endswith("torch_xla") and xla["PJRT_DEVICE"] == "CPU"
    assert "torch._dynamo" in prewarm.runtime_env("torch")["env_vars"][prewarm.ENV_IMPORTS]


def test_off_with_raylab_prewarm_0_or_a_hook_of_the_jobs_own(monkeypatch):
    monkeypatch.setenv(prewarm.ENV_IMPORTS, "0")
    assert not prewarm.enabled() and HOOK not in prewarm.runtime_env("torch")["env_vars"]
    monkeypatch.delenv(prewarm.ENV_IMPORTS)
    monkeypatch.setenv(HOOK, "their.own.hook")
    assert not prewarm.enabled() and HOOK not in prewarm.runtime_env("tf")["env_vars"]


def test_the_hook_imports_on_a_thread_and_never_raises(monkeypatch):
    monkeypatch.setenv(prewarm.ENV_IMPORTS, "json,no_such_module_here")
    prewarm.start()  # returns at once; a module that does not import is left to the training function
    import threading

    for t in threading.enumerate():
        if t.name == "raylab-prewarm":
            t.join(timeout=30)
    assert "json" in prewarm.started and "no_such_module_here" not in sys.modules


def test_the_floor_is_kept_per_host_and_versions(tmp_path, monkeypatch):
    saved = floor.save(
        {"fit_entry_s": 5.0, "fit_total_s": 6.0, "import_tf_s": 6.5, "import_torch_s": 2.0}, tmp_path / "kept.json"
    )
    figures = floor.load(saved)
    assert floor.floor_for("tf", figures) == 11.5 and floor.floor_for("torch", figures) == 7.0
    assert floor.floor_for("xla", figures) is None  # not measured: none recorded
    assert figures["measured"].startswith(time.strftime("%Y-%m-%d"))
    mine = floor.identity()
    monkeypatch.setattr(floor, "identity", lambda: {**mine, "ray": "0.0.1"})  # other versions: not this floor
    assert floor.load(saved) is None
    assert floor.load(tmp_path / "missing.json") is None
