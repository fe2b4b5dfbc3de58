"""One HOME and one Ray auth token for every Ray cluster this test process starts in-process.

Ray 2.60 keeps token-auth state per process: a token read once (by an import at collection time
or the first in-process `ray.init()`) is cached in C++, and a cluster started later with another
token, or none, cannot be reached, or turns the driver's own server against its workers
("Missing authorization header"). So this is set when pytest loads this file, before any test
module is imported: a fresh HOME with a token file, RAY_AUTH_MODE=token and RAY_AUTH_TOKEN.
The integration and multi-node clusters use them; subprocess tests (e2e) set their own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

_SAVED = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
RAY_HOME = Path(tempfile.mkdtemp(prefix="raylab-test-home-"))
TOKEN = secrets.token_hex(32)
(RAY_HOME / ".ray").mkdir()
(RAY_HOME / ".ray" / "auth_token").write_text(TOKEN)
os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
os.environ.update(HOME=str(RAY_HOME), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)


def pytest_unconfigure(config):
    for k, v in _SAVED.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(RAY_HOME, ignore_errors=True)


def raylet_pids(nodes) -> set[int]:
    """The raylet processes of in-process Ray nodes (`ray._private.node.Node`)."""
    from ray._private import ray_constants

    return {info.process.pid for node in nodes
            for info in node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [])}


def kill_orphaned_workers(raylets: set[int], timeout: float = 20.0) -> list[int]:
    """Kills the worker processes those raylets started and left behind; returns their pids.

    After a simulated multi-node cluster shuts down, a Ray Train TrainController has been seen
    to outlive its raylet (reparented to init, polling for ever). Workers carry their raylet's pid
    in RAY_RAYLET_PID, so only this cluster's processes are touched.
    """
    import signal
    import time

    marks = {f"RAY_RAYLET_PID={pid}".encode() for pid in raylets}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = set((proc / "environ").read_bytes().split(b"\0"))
        except OSError:  # gone already, or not ours to read
            continue
        if env & marks:
            found.append(int(proc.name))
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() for pid in found) and time.monotonic() < deadline:
        time.sleep(0.2)
    return found


# Ray Train start-ups per test file, against what each file declares (tests/startups.py).
_COUNTER = None
_DECLARED: dict[str, int] = {}


def pytest_sessionstart(session):
    global _COUNTER
    from tests.startups import StartupCounter

    _COUNTER = StartupCounter()
    _COUNTER.start()


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "RAY_TRAIN_STARTS"):
            _DECLARED[item.nodeid.split("::")[0]] = module.RAY_TRAIN_STARTS


def pytest_runtest_logstart(nodeid, location):
    if _COUNTER is not None:
        with _COUNTER.lock:
            _COUNTER.current = nodeid


def _over_budget() -> list[str]:
    return [f"{f}: {n} start-ups, declares {_DECLARED[f]}" if f in _DECLARED
            else f"{f}: {n} start-ups, declares none (RAY_TRAIN_STARTS)"
            for f, n in sorted(_COUNTER.by_file().items()) if n > _DECLARED.get(f, 0)]


def pytest_sessionfinish(session, exitstatus):
    if _COUNTER is None:
        return
    _COUNTER.stop()
    if _over_budget() and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _COUNTER is None:
        return
    files = _COUNTER.by_file()
    tr = terminalreporter
    tr.section("Ray Train start-ups")
    for f, n in sorted(files.items()):
        tr.write_line(f"{n:4d}  {f}" + (f"  (declares {_DECLARED[f]})" if f in _DECLARED else ""))
    tr.write_line(f"{sum(files.values()):4d}  in all")
    for line in _over_budget():
        tr.write_line(f"OVER BUDGET: {line}: share a run that already happens, or raise the declaration "
                      "if a new start-up is worth its 12-20 s", red=True)
