"""Start-up overlap: a trial's Ray Train worker processes start importing their framework the moment they start.

A Ray Train worker process spends its first seconds on Ray's own set-up (importing Ray Train, which brings
ray.data, pandas and pyarrow, then waiting on the controller's calls) before the training function runs; only
then would `import tensorflow` (5 s here) or `import torch` begin. Ray runs a worker-process set-up hook as soon
as a process has connected, before its first task: raylab's hook (set per trial through Ray Train's
`worker_runtime_env`) starts those imports on a background thread, so they fill the waits. The training
function's own imports then find the modules loaded, or wait on Python's import lock for the rest.

Each worker loop's first act is `hello` (raylab/loop/start.py): it tells the trial's sink the process's pid, so the
console can file the process's output under its trial when several trials run at once (raylab/runtime/console.py), and
what the process found in its environment when it started (read from /proc/self/environ, which later changes to
os.environ do not touch): the trial records it as the tag `worker_start_env`. (Not from the hook: calling an actor
there, before the process's first task, crashes Ray 2.60's worker.)

Every trial still gets new worker processes: nothing is carried from one trial to the next.
"""

from __future__ import annotations

import os
import threading
import time

ENV_IMPORTS = "RAYLAB_PREWARM"  # comma-separated modules to import at process start

started: dict[str, float] = {}  # module -> seconds its import took on the hook's thread (for tests and phases)
_thread: threading.Thread | None = None  # the hook's import thread, in a process whose hook ran


def enabled() -> bool:
    from raylab._ray import ray_constants

    return not (os.environ.get(ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR) or os.environ.get(ENV_IMPORTS) == "0")


def runtime_env(framework: str, env: dict | None = None) -> dict:
    """Ray Train's worker_runtime_env for a trial of `framework` (its name): the hook and what it imports."""
    from raylab._ray import ray_constants

    from raylab import registry

    fw = registry.framework(framework)
    # The job brought its own hook (keep it), or RAYLAB_PREWARM=0 (the benchmarks' before/after switch).
    if not enabled():
        return {"env_vars": {**fw.import_env, **(env or {})}}
    return {
        "env_vars": {
            ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR: "raylab.frameworks.prewarm.start",
            ENV_IMPORTS: ",".join(fw.imports),
            **fw.import_env,
            **(env or {}),
        }
    }


def start() -> None:
    """Ray's worker-process set-up hook. Never raises: a failing hook would make Ray drop the worker."""
    modules = [m for m in os.environ.get(ENV_IMPORTS, "").split(",") if m]
    if modules:
        # numpy first, on this thread: a Ray Data task started in this process (tasks inherit the trial's runtime
        # environment) imports pandas and numpy on its own thread, and two threads loading numpy's C extension at
        # once fail with "cannot load module more than once per process" (seen with jax's imports, 2026-11-26).
        try:
            import numpy  # noqa: F401
        except Exception:  # noqa: BLE001 - the hook never raises
            pass
        global _thread
        _thread = threading.Thread(target=_import, args=(modules,), name="raylab-prewarm", daemon=True)
        _thread.start()


def settled(timeout: float = 300.0) -> None:
    """Waits until the hook's imports have ended. Code that imports deep into a framework from the main thread while
    they run (torch.compile importing torch._inductor beside the hook's torch._dynamo) can meet a half-initialised
    module ("cannot import name ... from partially initialized module"), so it waits first."""
    if _thread is not None:
        _thread.join(timeout)


def _import(modules: list[str]) -> None:
    import importlib

    for module in modules:
        t0 = time.perf_counter()
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the training function's own import reports the error
            return
        started[module] = time.perf_counter() - t0
