"""Counts Ray Train start-ups (one `fit()`: one `TrainController` actor process) per test file, whoever starts them.

A trial's start-up (12-20 s here) is what the suite's time is made of, so the suite keeps count of them. A
`fit()` runs its controller in a Ray actor process, and Ray records it: the worker process's log file in its
cluster's session directory (`logs/worker-<id>-<job>-<pid>.out`) says `:actor_name:TrainController` as the actor
is created, and the file stays after the process ends. A thread in the pytest process, every POLL_S, learns each
running cluster's log directory from its raylet's and GCS's command lines (`--log_dir=`), reads what its worker
logs added since, and records each controller once by pid, charged to the test running when it was first seen;
a controller however short-lived is in its log (one that lived between two polls, too). It also reads /proc for
processes titled `ray::TrainController` (the same pid: one controller, counted once). That sees the trials of this
process's in-process clusters, of recipes run as subprocesses and of jobs submitted to a `ray start` head alike,
with no hook in raylab. A restart after a lost worker keeps its controller: it is not a new start-up. Paths are
compared resolved (a session directory reached through `session_latest` or pytest's `pytest-current` is one).
RAYLAB_DEBUG_STARTUPS=FILE appends each controller counted, with the test it was charged to.

Each test file declares what its tests may start: `RAY_TRAIN_STARTS = N` at module level. A run shared by
several tests (tests/integration/conftest.py `shared_run`) is charged to its own name with the start-ups it
declares, whichever test first asks for it. The run fails when a file or a shared run starts more than it
declares, or starts any without declaring (tests/conftest.py), so the next capability adds its assertions to a
run that already happens instead of adding start-ups unnoticed.

**Start-ups a search decides.** A few runs start as many Ray Train runs as a search needs: `--batch max` probes
sizes until it finds the allocator's edge, and where the edge falls differs between machines (two frameworks took 8
to 12). Such a file says so at module level (`STARTS_VARY = "why"`), declares the most its runs can reach as
RAY_TRAIN_STARTS, and each of its tests reads from what its run recorded how many start-ups it needed
(`needed(n, how)`, e.g. the search's probes plus the trial). Its start-ups are then held to that reading: a correct
run on any machine passes, and one start-up more than the search needed still fails. A file that says its
start-ups vary and starts some without reading them fails too.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import Counter
from pathlib import Path

POLL_S = 0.5
MARK = b":actor_name:TrainController"  # what Ray writes to an actor's worker log as it creates a controller


def cmdlines():
    """(/proc/PID, its command line) of every process, those gone or not ours to read left out."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                yield proc, (proc / "cmdline").read_bytes()
            except OSError:
                continue


class RayLogs:
    """The controllers Ray recorded in the worker logs of every cluster seen running (its raylet's or GCS's
    `--log_dir=`), each log read once up to where it was read before (a session directory that raylab prunes
    later was read while its cluster ran)."""

    def __init__(self):
        self.dirs: set[Path] = set()
        self.read: dict[str, int] = {}  # worker log -> bytes read
        self.tails: dict[str, bytes] = {}  # its last bytes, so a mark split across two reads is still found

    def learn(self, cmdline: bytes) -> None:
        for arg in cmdline.split(b"\0"):
            if arg.startswith(b"--log_dir="):  # resolved: a controller's stdout link (below) is its real path
                self.dirs.add(Path(os.path.realpath(arg.split(b"=", 1)[1].decode(errors="replace"))))

    def controllers(self) -> set[str]:
        found = set()
        for logs in list(self.dirs):
            try:
                entries = [e for e in os.scandir(logs) if e.name.startswith("worker-") and e.name.endswith(".out")]
            except OSError:  # pruned, or not made yet
                continue
            for entry in entries:
                done = self.read.get(entry.path, 0)
                try:
                    size = entry.stat().st_size
                    if size <= done:
                        continue
                    with open(entry.path, "rb") as f:
                        f.seek(done)
                        text = self.tails.get(entry.path, b"") + f.read(size - done)
                except OSError:
                    continue
                self.read[entry.path], self.tails[entry.path] = size, text[-len(MARK) :]
                if MARK in text:
                    found.add(entry.path)
        return found


def _controllers(logs: RayLogs | None = None) -> set[str]:
    """The controllers running now (/proc) and those Ray's logs record (`logs`, which learns the log directories
    of the clusters running now), each named by its worker log (a controller's stdout): the same controller
    from both is one. One whose log cannot be read is named by its pid and start time."""
    found = set()
    for proc, cmdline in cmdlines():
        if cmdline.startswith(b"ray::TrainController"):
            try:
                found.add(os.path.realpath(os.readlink(proc / "fd" / "1")))
            except OSError:
                try:  # the start time (field 22 of stat) tells a new process from a reused pid
                    found.add(f"pid {proc.name} {(proc / 'stat').read_text().rsplit(')', 1)[1].split()[19]}")
                except (OSError, IndexError):
                    continue
        elif logs is not None and b"--log_dir=" in cmdline:
            logs.learn(cmdline)
    return found | (logs.controllers() if logs is not None else set())


class StartupCounter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True, name="ray-train-startups")
        self.current = "(between tests)"  # the test id new start-ups are charged to
        self.seen: set[str] = set()  # each controller's worker log (tests/startups.py _controllers)
        self.logs = RayLogs()
        self.by_test: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(POLL_S):
            self.poll()

    def poll(self):
        new = _controllers(self.logs) - self.seen
        if new and os.environ.get("RAYLAB_DEBUG_STARTUPS"):
            with open(os.environ["RAYLAB_DEBUG_STARTUPS"], "a") as f:
                f.write("".join(f"{self.current}\t{k}\n" for k in new))
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
DECLARED: dict[str, int] = {}  # owner (a test file, or "run:NAME") -> the start-ups it may make (at most)
VARIES: dict[str, str] = {}  # owner -> why its start-ups vary (its module's STARTS_VARY)
NEEDED: dict[str, list[tuple[int, str]]] = {}  # owner -> (start-ups, how read) its runs needed, read from their records


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


def needed(n: int, how: str) -> None:
    """The running test's run needed `n` Ray Train start-ups, read from what it recorded (`how`: e.g. the search's
    probes and the trial): its file, which says its start-ups vary (STARTS_VARY), is held to the sum of these."""
    if COUNTER is None:
        return
    with COUNTER.lock:
        test = COUNTER.current
    NEEDED.setdefault(owner(test), []).append((n, how))


def started_by_this_test() -> int:
    """The Ray Train start-ups the running test has made so far (the counter polled now)."""
    if COUNTER is None:
        return 0
    COUNTER.poll()
    with COUNTER.lock:
        return COUNTER.by_test[COUNTER.current]


def allowed(name: str) -> int | None:
    """The start-ups an owner may make: what its runs were read to need where it says they vary (never more than
    it declares), else its declaration; None where it declares none."""
    if name in NEEDED:
        return min(sum(n for n, _ in NEEDED[name]), DECLARED.get(name, 0))
    return DECLARED.get(name)


def over_budget(counts=None) -> list[str]:
    """One line per owner that started more Ray Train runs than it may (`counts`: owner -> start-ups, by default
    what the counter saw)."""
    if counts is None:
        if COUNTER is None:
            return []
        counts = COUNTER.by_owner()
    out = []
    for f, n in sorted(counts.items()):
        if f not in DECLARED:
            out.append(f"{f}: {n} start-ups, declares none (RAY_TRAIN_STARTS)")
        elif n > DECLARED[f]:
            out.append(f"{f}: {n} start-ups, declares {DECLARED[f]}")
        elif f in NEEDED and n > allowed(f):
            how = "; ".join(h for _, h in NEEDED[f])
            out.append(f"{f}: {n} start-ups, but its runs needed {allowed(f)} ({how})")
        elif f in VARIES and f not in NEEDED and n:
            out.append(
                f"{f}: {n} start-ups, and its start-ups vary ({VARIES[f]}) but no test read what its run "
                "needed (tests/startups.py `needed`)"
            )
    return out
