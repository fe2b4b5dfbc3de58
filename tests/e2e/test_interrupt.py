"""A recipe stopped mid-trial (SIGTERM, as `ray job stop` sends) leaves its runs KILLED, not RUNNING; and what its
in-process cluster listened on while it trained (the listening check of test_listening.py, on this run); a SIGTERM
that reaches Ray's failure handler during ray.init stops the driver without an abort (raylab/runtime/stopping.py).
Drivers stopped at other moments of their start-up: test_interrupt_startup.py (full tier)."""

from __future__ import annotations

import contextlib
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import paced
from tests.e2e.listening import KINDS, Listeners

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 1  # the stopped trial
SECONDS = 45  # 32 s on 2026-12-06 (the default tier, the 2-core VM)

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def user_env(home: Path, *unset: str) -> dict:
    """A fresh user's environment for a recipe run in a subprocess: its own HOME, Ray's default auth."""
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", *unset):  # the default: ray.init() makes its own token
        env.pop(k, None)
    return env


def sqlite_store(where: Path) -> tuple[str, MlflowClient]:
    """(URI, client) of a sqlite MLflow store, created and migrated now: a reader racing the recipe's migration
    fails."""
    uri = f"sqlite:///{where}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments()
    return uri, client


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> dict:
    """torch:none on the quick subset, SIGTERMed once its first epoch is in MLflow and it holds mid-epoch 2 (the
    held recipe, tests/held_recipe.py: it cannot end first, whatever this machine's speed), while a thread records
    what its process tree listens on (test_listening.py): {"code", "out", "client", "listeners"}."""
    tmp_path = tmp_path_factory.mktemp("stopped")
    env = user_env(tmp_path)
    uri, client = sqlite_store(tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "held_recipe.py"),
        "--quick",
        "--compile",
        "off",
        "--trials",
        "torch:none",
        "--workers",
        "1",
        "--epochs",
        "3",
        "--steps-per-epoch",
        str(paced(200)),
        "--tracking-uri",
        uri,
        "--experiment",
        "stopped",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env={**env, "RAYLAB_TEST_GATE": str(gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    watcher = Listeners(proc.pid)
    watcher.start()
    try:

        def first_epoch_logged():
            exp = client.get_experiment_by_name("stopped")
            runs = client.search_runs([exp.experiment_id]) if exp else []
            trials = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
            return trials and client.get_metric_history(trials[0].info.run_id, "val_accuracy") and runs

        wait_for(
            lambda: (gate / "held-1").exists() and first_epoch_logged(),
            480,
            "the trial's first epoch in MLflow, and the trial held mid-epoch 2",
        )
        watcher.stop()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        return {"code": proc.returncode, "out": out, "client": client, "listeners": watcher}
    finally:
        watcher.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_sigterm_marks_the_trial_and_parent_killed(stopped):
    assert stopped["code"] == 130, stopped["out"][-3000:]
    client = stopped["client"]
    runs = client.search_runs([client.get_experiment_by_name("stopped").experiment_id])
    assert sorted(r.info.status for r in runs) == ["KILLED", "KILLED"]


def test_a_running_trials_cluster_listens_off_loopback_only_as_documented(stopped):
    """What the trial's in-process cluster listened on while it trained, read from /proc: nothing on a
    non-loopback address that docs/clusters.md does not name."""
    docs = (ROOT / "docs" / "clusters.md").read_text()
    section = docs.split("## What listens on the network", 1)[1].split("\n## ", 1)[0]
    named = " ".join(line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))  # first column
    for kind in KINDS:
        # the table's first column names every kind allowed: a process as code, "the driver" in words
        assert f"`{kind}`" in named or (" " in kind and kind in named), kind
    seen = stopped["listeners"].seen
    assert stopped["listeners"].workers_seen, seen  # the trial's own workers were caught listening
    unnamed = {where: t for where, t in seen.items() if not any(match(t) for match in KINDS.values())}
    assert not unnamed, unnamed


def left_of(session: int, tmp: Path) -> list[str]:
    """The processes of a driver started in a session of its own: that session's, or any naming its temp dir."""
    out = subprocess.run(["ps", "-eo", "pid=,sid=,args="], capture_output=True, text=True, timeout=30).stdout
    rows = [line.split(None, 2) for line in out.splitlines() if line.strip()]
    return [
        " ".join(r)
        for r in rows
        if len(r) == 3 and (r[1] == str(session) or str(tmp) in r[2]) and r[0] != str(os.getpid())
    ]


HELD = """
import os, signal, time
import ray
from raylab.runtime import stopping
with stopping.taken():
    try:
        with stopping.held():
            ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")
            os.kill(os.getpid(), signal.SIGTERM)  # Ray's C++ failure handler holds SIGTERM now
            time.sleep(0.5)
    except stopping.Stop as e:
        print("stopped:", e, flush=True)
    with stopping.held(raise_pending=False):
        ray.shutdown()
    time.sleep(4)  # past the 3 s alarm absl arms in its handler
print("alive")
"""


def test_a_sigterm_through_rays_failure_handler_during_ray_init_stops_without_an_abort(tmp_path):
    """The window the 10 s stop hit at random (rc -6 in CI): a SIGTERM that reaches Ray's C++ failure handler
    while ray.init runs is noted and raised once the cluster is whole, and the alarm absl armed does not abort
    the process three seconds later."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))
    env = {**user_env(tmp_path), "RAY_TMPDIR": str(ray_tmp), "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", HELD],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
        assert "stopped: stopped by SIGTERM while the Ray cluster started" in done.stdout, done.stdout
        assert done.stdout.rstrip().endswith("alive"), done.stdout
    finally:
        for row in left_of(-1, ray_tmp):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(row.split()[0]), signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)
