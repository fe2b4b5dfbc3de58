"""Counts Ray Train start-ups (one `fit()`: one `TrainController` actor process) per test file, whoever starts them.

A trial's start-up (12-20 s here) is what the suite's time is made of, so the suite keeps count of them. A
`fit()` runs its controller in a Ray actor process whose title Ray sets to `ray::TrainController...`; a
thread in the pytest process reads /proc every POLL_S and records each such process once (pid and start
time), charged to the test running when it was first seen. That sees the trials of this process's in-process
clusters, of recipes run as subprocesses and of jobs submitted to a `ray start` head alike, with no hook in
raylab. A restart after a lost worker keeps its controller: it is not a new start-up.

Each test file declares what its tests may start: `RAY_TRAIN_STARTS = N` at module level. A run shared by
several tests (tests/integration/conftest.py `shared_run`) is charged to its own name with the start-ups it
declares, whichever test first asks for it. The run fails when a file or a shared run starts more than it
declares, or starts any without declaring (tests/conftest.py), so the next capability adds its assertions to a
run that already happens instead of adding start-ups unnoticed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from pathlib import Path

POLL_S = 0.5  # a controller lives for a whole fit() (seconds at least), so none is missed


def cmdlines():
    """(/proc/PID, its command line) of every process, those gone or not ours to read left out."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                yield proc, (proc / "cmdline").read_bytes()
            except OSError:
                continue


def _controllers() -> set[tuple[int, str]]:
    found = set()
    for proc, cmdline in cmdlines():
        if cmdline.startswith(b"ray::TrainController"):
            try:  # the start time (field 22 of stat) tells a new process from a reused pid
                found.add((int(proc.name), (proc / "stat").read_text().rsplit(")", 1)[1].split()[19]))
            except (OSError, IndexError):
                continue
    return found


class StartupCounter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True, name="ray-train-startups")
        self.current = "(between tests)"  # the test id new start-ups are charged to
        self.seen: set[tuple[int, str]] = set()
        self.by_test: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(POLL_S):
            self.poll()

    def poll(self):
        new = _controllers() - self.seen
        with self.lock:
            self.seen |= new
            self.by_test[self.current] += len(new)

    def stop(self):
        self.done.set()
        self.join(timeout=10)
        self.poll()

    def by_owner(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for test, n in self.by_test.items():
            if n:
                out[owner(test)] += n
        return out


COUNTER: StartupCounter | None = None  # started by tests/conftest.py for the whole session
DECLARED: dict[str, int] = {}  # owner (a test file, or "run:NAME") -> the start-ups it may make


def owner(test_id: str) -> str:
    """What a start-up is charged to: a shared run's name, or the test's file."""
    return test_id if test_id.startswith("run:") else test_id.split("::")[0]


@contextlib.contextmanager
def charged_to(run: str, starts: int, seconds: float | None = None):
    """Start-ups made inside are charged to the shared run `run:NAME`, which declares `starts` of them and
    `seconds` of time (tests/tiers.py's budget table; the run's seconds are also its file's)."""
    from tests import tiers

    name = f"run:{run}"
    DECLARED[name] = starts
    began = time.monotonic()
    try:
        if COUNTER is None:
            yield
            return
        with _charged(name):
            yield
    finally:
        if tiers.LEDGER is not None:
            tiers.LEDGER.add_run(run, time.monotonic() - began, seconds)


@contextlib.contextmanager
def _charged(name: str):
    with COUNTER.lock:
        before, COUNTER.current = COUNTER.current, name
    try:
        yield
    finally:
        COUNTER.poll()  # what started in its last moments is still this run's
        with COUNTER.lock:
            COUNTER.current = before


def over_budget() -> list[str]:
    if COUNTER is None:
        return []
    return [f"{f}: {n} start-ups, declares {DECLARED[f]}" if f in DECLARED
            else f"{f}: {n} start-ups, declares none (RAY_TRAIN_STARTS)"
            for f, n in sorted(COUNTER.by_owner().items()) if n > DECLARED.get(f, 0)]
