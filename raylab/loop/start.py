"""The start every worker loop shares, written once (`start`): the trial's start-up phases from its start, the
process telling its trial's sink who it is and what it found in its environment (`hello`: the console files the
process's output under its trial), a streamed trial's first reads begun (raylab/data/shard.py read_early), the
framework's own imports (the framework's worker.py hands them in: threads, seeds, what its library reads at
import) timed as the phase `imports`, and the Ray Train context. Each framework's worker.py then builds its model
and data and hands the loop its `Training` (raylab/loop/epochs.py).
"""

from __future__ import annotations

import os
from typing import Any, Callable

# What each framework's worker loop imports first is its FRAMEWORK.imports; what it reads at import, set from the
# start of the process (the worker loops set the same again), its FRAMEWORK.import_env and its kind's worker_env
# (XLA's PJRT device and flags). What a worker reports of its environment at process start: what raylab sets there
# (raylab/driver/trainer.py worker_env).
START_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "PJRT_DEVICE",
    "CPU_NUM_DEVICES",
    "XLA_FLAGS",
    "PJRT_NPROC",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "JAX_PLATFORMS",
    "TF_CPP_MIN_LOG_LEVEL",
)


def hello(sink) -> None:
    """A worker process tells its trial's sink who it is (its output then goes to the trial's log)."""
    if sink is None:
        return
    import ray

    try:
        sink.hello.remote(os.getpid(), ray.util.get_node_ip_address())
        sink.started_env.remote(os.getpid(), start_env())
    except Exception:  # noqa: BLE001 - attribution of output is a nicety; the trial must not depend on it
        pass


def start_env(path: str = "/proc/self/environ") -> dict:
    """The START_ENV variables this process was started with (os.environ where /proc is not there)."""
    try:
        with open(path, "rb") as f:
            pairs = (item.decode(errors="replace").partition("=") for item in f.read().split(b"\0") if item)
            env = {k: v for k, _, v in pairs}
    except OSError:
        env = dict(os.environ)
    return {k: env[k] for k in START_ENV if k in env}


def start(config: dict, imports: Callable[[Any], Any] | None = None):
    """(cfg, phases, Ray Train context, what `imports(cfg)` returned) for a trial's worker loop."""
    from raylab.data.shard import read_early
    from raylab.timing import Phases

    cfg = config["cfg"]
    phases = Phases(cfg.trial_start)
    hello(cfg.sink)
    read_early(cfg)
    found = imports(cfg) if imports is not None else None
    import ray.train

    phases.mark("imports")
    return cfg, phases, ray.train.get_context(), found
