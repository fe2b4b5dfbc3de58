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
import sys
import tempfile
import time
from pathlib import Path

import pytest

_SAVED = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
RAY_HOME = Path(tempfile.mkdtemp(prefix="raylab-test-home-"))
TOKEN = secrets.token_hex(32)
(RAY_HOME / ".ray").mkdir()
(RAY_HOME / ".ray" / "auth_token").write_text(TOKEN)
os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
os.environ.update(HOME=str(RAY_HOME), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)


FINAL = {}  # the session's exit status, once every hook that may change it has run

# RAYLAB_TEST_PACE=k: the speed the tests that act on a held trial (tests/held_recipe.py) see this machine run at,
# to show that their outcome does not depend on it. k > 1: every held training step takes k times as long (the
# recipe reads it); k < 1: the trials run k x the steps (`paced`), so they end 1/k times sooner, as on a faster
# machine. The faults land all the same.
PACE = float(os.environ.get("RAYLAB_TEST_PACE") or 1)


def paced(steps: int) -> int:
    """A held test's steps per epoch at RAYLAB_TEST_PACE."""
    return steps if PACE >= 1 else max(4, round(steps * PACE))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Restores the environment, then leaves without the interpreter's teardown (RAYLAB_TEST_TEARDOWN=1 keeps it).

    This process has imported TensorFlow, PyTorch and Ray (and run their threads) by the end of a full run, and
    their C++ destructors at interpreter exit have crashed it: CI's run of 2026-11-25 printed "417 passed" and
    then died with SIGSEGV (exit 139), so nothing landed. No test asserts on that teardown, and every test has
    cleaned up its clusters and processes by now, so the session's own exit status is the result."""
    for k, v in _SAVED.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(RAY_HOME, ignore_errors=True)
    if "status" in FINAL and os.environ.get("RAYLAB_TEST_TEARDOWN") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(FINAL["status"])


def raylet_pids(nodes) -> set[int]:
    """The raylet processes of in-process Ray nodes (`ray._private.node.Node`)."""
    from ray._private import ray_constants

    return {
        info.process.pid for node in nodes for info in node.all_processes.get(ray_constants.PROCESS_TYPE_RAYLET, [])
    }


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


# Ray Train start-ups per test file and shared run, against what each declares (tests/startups.py).
def pytest_sessionstart(session):
    from tests import footprint, startups, tiers

    if session.config.option.collectonly:  # nothing runs: nothing to count or budget
        return
    tiers.LEDGER = tiers.Ledger()

    startups.COUNTER = startups.StartupCounter()
    startups.COUNTER.start()
    footprint.FOOTPRINT = footprint.Footprint(session.config._tmp_path_factory.getbasetemp(), RAY_HOME)
    footprint.FOOTPRINT.start()


def pytest_addoption(parser):
    group = parser.getgroup("raylab", "raylab's tiers (tests/tiers.py)")
    group.addoption(
        "--full", action="store_true", help="run the full tier: every test (without it, only the default tier's)"
    )
    group.addoption(
        "--slice",
        metavar="I/K",
        default=None,
        help="with --full: only slice I of K of the tests only the full tier runs (what .ci/run runs "
        "after the default tier), balanced by the files' declared seconds",
    )


def pytest_configure(config):
    from tests import tiers

    if config.getoption("--slice") and not config.getoption("--full"):
        raise pytest.UsageError("--slice I/K is a slice of the full tier: give --full too")
    if config.getoption("--slice"):
        try:
            tiers.parse_slice(config.getoption("--slice"))
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None


def pytest_collection_modifyitems(session, config, items):
    from tests import startups, tiers

    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "RAY_TRAIN_STARTS"):
            startups.DECLARED[item.nodeid.split("::")[0]] = module.RAY_TRAIN_STARTS
        if module is not None and hasattr(module, "STARTS_VARY"):
            startups.VARIES[item.nodeid.split("::")[0]] = module.STARTS_VARY
        seconds = tiers.declared_seconds(item)
        if seconds is not None and tiers.LEDGER is not None:
            tiers.LEDGER.declared[tiers.owner_of(item.nodeid.split("::")[0])] = seconds
    full, slice_ = config.getoption("--full"), config.getoption("--slice")
    slice_ = tiers.parse_slice(slice_) if slice_ else None
    try:
        keep = tiers.select(items, full, slice_)
    except ValueError as e:  # a TIER that is no tier
        raise pytest.UsageError(str(e)) from None
    if not full:
        TIER["what"], TIER["budget"] = "the default tier", tiers.DEFAULT
    elif slice_:
        TIER["what"], TIER["budget"] = f"the full tier's slice {slice_[0]}/{slice_[1]}", tiers.SLICE
    else:
        TIER["what"], TIER["budget"] = "the full tier", None
    if len(keep) < len(items):
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
        items[:] = keep


TIER: dict = {"what": "the default tier", "budget": None}  # what this run is, and the budget it is held to


def pytest_report_collectionfinish(config, start_path, items):
    """What this run is: its tier (or slice), and the files in it with the seconds and start-ups each declares."""
    from tests import startups, tiers

    files: dict[str, tuple] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        files.setdefault(tiers.owner_of(path), (tiers.declared_seconds(item), startups.DECLARED.get(path)))
    seconds = sum(s or 0 for s, _ in files.values())
    lines = [
        f"raylab: {TIER['what']}: {len(items)} tests in {len(files)} files or groups, declaring {seconds:.0f} s"
        + (
            ""
            if TIER["budget"] is None
            else f" (its budget: {TIER['budget'].seconds:.0f} s, {TIER['budget'].starts} Ray Train start-ups)"
        )
    ]
    if config.getoption("verbose") > 0 or config.getoption("--slice"):
        lines += [
            f"    {name}: {s if s is not None else '?'} s, {n if n is not None else 0} start-ups"
            for name, (s, n) in sorted(files.items())
        ]
    return lines


def pytest_runtest_logstart(nodeid, location):
    from tests import footprint, startups

    if startups.COUNTER is not None:
        with startups.COUNTER.lock:
            startups.COUNTER.current = nodeid
    if footprint.FOOTPRINT is not None:
        footprint.FOOTPRINT.current = nodeid


FAILED_FILES: set[str] = set()  # test files with a failed test (their disk footprint is kept, tests/footprint.py)


def pytest_runtest_logreport(report):
    from tests import tiers

    if tiers.LEDGER is not None:
        tiers.LEDGER.add_report(report)
    if report.failed:
        FAILED_FILES.add(report.nodeid.split("::")[0])


@pytest.fixture(scope="module", autouse=True)
def disk_footprint(request):
    """After the file's module-scoped fixtures end (this one is set up first, so torn down last), what it left on
    disk goes, unless a test of it failed (tests/footprint.py)."""
    from tests import footprint

    if footprint.FOOTPRINT is None:
        yield
        return
    mark = footprint.FOOTPRINT.mark()
    yield
    name = request.node.nodeid
    footprint.FOOTPRINT.end_of_file(mark, name, failed=name in FAILED_FILES)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """The start-up budget decides the status first; then, the outermost wrapper, it keeps the status every other
    sessionfinish hook and wrapper (the terminal summary) left. If one of them raised, none is kept, and the
    process leaves through pytest's own teardown with the traceback."""
    from tests import footprint, startups, tiers

    if footprint.FOOTPRINT is not None:
        footprint.FOOTPRINT.stop()
    if tiers.LEDGER is not None:
        tiers.LEDGER.ended = time.monotonic()
    if startups.COUNTER is not None:
        startups.COUNTER.stop()
        if (startups.over_budget() or budget_table()[2]) and session.exitstatus == 0:
            session.exitstatus = 1
    result = yield
    FINAL["status"] = int(session.exitstatus)
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from tests import footprint, startups

    if footprint.FOOTPRINT is not None:
        terminalreporter.section("Disk (tests/footprint.py)")
        for line in footprint.FOOTPRINT.summary():
            terminalreporter.write_line(line)
        if footprint.FOOTPRINT.lowest[0] < footprint.LOW_FREE:
            terminalreporter.write_line(
                "LOW DISK: the suite came within 2 GiB of a full disk; see which test was running then, above", red=True
            )
    if startups.COUNTER is None:
        return
    tr = terminalreporter
    lines, over, failed = budget_table()
    tr.section(f"Budget: {TIER['what']} (tests/tiers.py, tests/startups.py)")
    for line in lines:
        tr.write_line(line)
    for line in over:
        tr.write_line(
            f"OVER IN SECONDS: {line} (listed, not failed: the machine may be slow now; if it stays "
            "over, cut the run or raise the declaration with a measurement)",
            yellow=True,
        )
    for line in startups.over_budget() + failed:
        tr.write_line(
            f"OVER BUDGET: {line}: add the assertions to a run that already happens, or raise the "
            "declaration if a new start-up is worth its 12-20 s",
            red=True,
        )


def budget_table():
    """(the budget table's lines, rows over on seconds, failures on start-ups) of this run so far."""
    from tests import startups, tiers

    if tiers.LEDGER is None or startups.COUNTER is None:
        return [], [], []
    counts: dict[str, int] = {}
    declared: dict[str, int] = {}  # a group's row (the unit files) declares what its files declare together
    for name, n in startups.COUNTER.by_owner().items():
        counts[tiers.owner_of(name)] = counts.get(tiers.owner_of(name), 0) + n
    for name, n in startups.DECLARED.items():
        declared[tiers.owner_of(name)] = declared.get(tiers.owner_of(name), 0) + n
    return tiers.table(
        tiers.LEDGER,
        counts,
        declared,
        TIER["budget"],
        TIER["what"],
        needed={f: startups.allowed(f) for f in startups.NEEDED},
    )


def make_template_store(where: Path) -> Path:
    """An MLflow sqlite store with its schema made (MLflow's migrations take seconds): copied, never opened."""
    from raylab.record.tracking import Tracker

    cwd = os.getcwd()
    os.chdir(where)
    try:
        Tracker(f"sqlite:///{where / 'mlflow.db'}")
    finally:
        os.chdir(cwd)
    return where / "mlflow.db"


import pytest  # noqa: E402 - below the environment set-up above, which must come first


@pytest.fixture(scope="session")
def template_db(tmp_path_factory) -> Path:
    """One migrated MLflow store for the session; each test or shared run copies it (tests/*/conftest.py)."""
    return make_template_store(tmp_path_factory.mktemp("template"))
