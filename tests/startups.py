"""Counts Ray Train start-ups (one `fit()`: one `TrainController` actor process) per test file, whoever starts them.

A trial's start-up (12-20 s here) is what the suite's time is made of, so the suite keeps count of them. A
`fit()` runs its controller in a Ray actor process, and Ray records it: the worker process's log file in its
cluster's session directory (`logs/worker-<id>-<job>-<pid>.out`) says `:actor_name:TrainController` as the actor
is created, and the file stays after the process ends. A thread in the pytest process, every POLL_S, learns each
running cluster's log directory from its raylet's and GCS's command lines (`--log_dir=`), reads what its worker
logs added since, and records each controller once by pid, charged to the test running when it was first seen;
a controller however short-lived is in its log (one that lived between two polls, too). It also reads /proc for
processes titled `ray::TrainController`. That sees the trials of this process's in-process clusters, of recipes run
as subprocesses and of jobs submitted to a `ray start` head alike, with no hook in raylab. A restart after a lost
worker keeps its controller: it is not a new start-up. A controller is named by its worker log's file name
(`worker-<worker id>-<job>-<pid>.out`, unique to the process), never by a path: the same file reached through
`session_latest`, pytest's `pytest-current`, a log Ray's log monitor moved to `logs/old/` as its process ended (read
there too), or a file gone from under its process (`... (deleted)`) is one controller. A running one whose log cannot be
read, or whose stdout is not its worker log (in CI one controller's process was seen, after its log, with the raylet's
`raylet.out` as its stdout, and was counted twice), is named by its pid, and its log, found before or after, is the same
controller, not a second. Each controller counted is kept with where it was seen (`COUNTER.found`), and a file over its
budget lists its controllers.
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


def log_name(path: str) -> str:
    """A controller's name: its worker log's file name (unique to the process), wherever the file is now."""
    return os.path.basename(path.removesuffix(" (deleted)"))


def pid_in(name: str) -> int | None:
    """The process a controller's name holds: a log's `worker-<id>-<job>-<pid>.out`, or a `pid N START` name."""
    if name.startswith("pid "):
        return int(name.split()[1])
    tail = name.removesuffix(".out").rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


class RayLogs:
    """The controllers Ray recorded in the worker logs of every cluster seen running (its raylet's or GCS's
    `--log_dir=`, and its `old/`, where Ray's log monitor moves the logs of processes that ended), each log read
    once up to where it was read before (a session directory that raylab prunes later was read while its cluster
    ran)."""

    def __init__(self):
        self.dirs: set[Path] = set()
        self.read: dict[str, int] = {}  # worker log -> bytes read
        self.tails: dict[str, bytes] = {}  # its last bytes, so a mark split across two reads is still found

    def learn(self, cmdline: bytes) -> None:
        for arg in cmdline.split(b"\0"):
            if arg.startswith(b"--log_dir="):
                self.dirs.add(Path(os.path.realpath(arg.split(b"=", 1)[1].decode(errors="replace"))))

    def controllers(self) -> dict[str, str]:
        """{controller's name (log_name): the log it was found in} for the marks read since the last call."""
        found = {}
        for logs in [d for base in list(self.dirs) for d in (base, base / "old")]:
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
                    found[log_name(entry.path)] = entry.path
        return found


def _controllers(logs: RayLogs | None = None, where: dict[str, str] | None = None) -> set[str]:
    """The controllers running now (/proc) and those Ray's logs record (`logs`, which learns the log directories
    of the clusters running now), each named by its worker log's file name (a controller's stdout): the same
    controller from both is one. One whose log cannot be read is named `pid N START` (its start time, field 22 of
    its stat, tells it from a reused pid). `where`, if given, gets each name's path or process."""
    found: dict[str, str] = {}
    for proc, cmdline in cmdlines():
        if cmdline.startswith(b"ray::TrainController"):
            try:
                path = os.readlink(proc / "fd" / "1")
            except OSError:
                path = None
            if path is not None and log_name(path).startswith("worker-"):
                found[log_name(path)] = f"running, pid {proc.name}, its stdout {path}"
                continue
            try:  # unreadable, or not its own log (the raylet's `raylet.out`, seen once): named by its pid
                start = (proc / "stat").read_text().rsplit(")", 1)[1].split()[19]
            except (OSError, IndexError):
                continue
            found[f"pid {proc.name} {start}"] = f"running, pid {proc.name}, its stdout {path or 'unreadable'}"
        elif logs is not None and b"--log_dir=" in cmdline:
            logs.learn(cmdline)
    if logs is not None:
        found.update({k: v for k, v in logs.controllers().items() if k not in found})
    if where is not None:
        where.update(found)
    return set(found)


class StartupCounter(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True, name="ray-train-startups")
        self.current = "(between tests)"  # the test id new start-ups are charged to
        self.seen: set[str] = set()  # each controller's name (tests/startups.py _controllers)
        self.found: dict[str, tuple[str, str]] = {}  # controller's name -> (the test charged, where it was seen)
        self.bare: dict[int, str] = {}  # pid -> the name of a controller counted with its log unread (`pid N START`)
        self.logs = RayLogs()
        self.by_test: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.polling = threading.Lock()
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(POLL_S):
            self.poll()

    def poll(self):
        with self.polling:  # the thread's poll and a test's (started_by_this_test, a shared run's end) one at a time
            self._poll()

    def _poll(self):
        where: dict[str, str] = {}
        new = []
        names = _controllers(self.logs, where) - self.seen
        logged = {pid_in(n) for n in [*self.found, *names] if not n.startswith("pid ")}  # before, or in this poll
        for name in sorted(names, key=lambda n: n.startswith("pid ")):  # logs first, then the processes by pid
            pid = pid_in(name)
            if name.startswith("pid ") and pid in logged:
                self.seen.add(name)  # its log is counted (before or now): the same process, its stdout not its log
            elif not name.startswith("pid ") and pid in self.bare:
                self.seen.add(name)  # counted while running, its log unread: the same process
                self.found[self.bare.pop(pid)] += (f"; its log {where[name]}",)
            else:
                new.append(name)
                if name.startswith("pid "):
                    self.bare[pid] = name
        if new and os.environ.get("RAYLAB_DEBUG_STARTUPS"):
            with open(os.environ["RAYLAB_DEBUG_STARTUPS"], "a") as f:
                f.write("".join(f"{self.current}\t{where[k]}\n" for k in new))
        with self.lock:
            self.seen.update(new)
            self.found.update({k: (self.current, where[k]) for k in new})
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

    def of(self, who: str) -> list[str]:
        """What each controller charged to an owner was, as seen: `name (where)`."""
        return [f"{name} ({''.join(where)})" for name, (test, *where) in self.found.items() if owner(test) == who]


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
        seen = "; ".join(COUNTER.of(f)) if COUNTER is not None else ""
        counted = f"; counted: {seen}" if seen else ""  # each controller charged, and where it was seen
        if f not in DECLARED:
            out.append(f"{f}: {n} start-ups, declares none (RAY_TRAIN_STARTS){counted}")
        elif n > DECLARED[f]:
            out.append(f"{f}: {n} start-ups, declares {DECLARED[f]}{counted}")
        elif f in NEEDED and n > allowed(f):
            how = "; ".join(h for _, h in NEEDED[f])
            out.append(f"{f}: {n} start-ups, but its runs needed {allowed(f)} ({how}){counted}")
        elif f in VARIES and f not in NEEDED and n:
            out.append(
                f"{f}: {n} start-ups, and its start-ups vary ({VARIES[f]}) but no test read what its run "
                "needed (tests/startups.py `needed`)"
            )
    return out
