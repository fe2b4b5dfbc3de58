"""The suite's count of Ray Train start-ups reads Ray's own record: a controller that lived between two polls is
counted, and one seen both running and in its log is one, also where the cluster's directory is reached through a
symbolic link (pytest's `pytest-current`, a RAY_TMPDIR given so)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests import startups

RAY_TRAIN_STARTS = 5  # its own: two actors of the controller's class name, three processes titled as one
SECONDS = 15

CLUSTER = """
import os, sys, time
from pathlib import Path
import ray

gate = Path(sys.argv[1])
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR")

@ray.remote(num_cpus=0)
class TrainController:
    def pid(self):
        return os.getpid()

(gate / "up").touch()
while not (gate / "go").exists():
    time.sleep(0.05)
brief = TrainController.remote()
pid = ray.get(brief.pid.remote())
ray.kill(brief)
while Path(f"/proc/{pid}").exists():  # gone before the test polls again
    time.sleep(0.02)
stays = TrainController.remote()
ray.get(stays.pid.remote())
(gate / "ran").touch()
while not (gate / "end").exists():
    time.sleep(0.05)
ray.shutdown()
"""


def wait_for(path: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.05)


def test_a_controller_that_lived_between_two_polls_is_counted_once(tmp_path):
    logs = startups.RayLogs()
    real = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))  # short: Ray's socket paths go under it
    link = Path(f"{real}-link")
    link.symlink_to(real)
    proc = subprocess.Popen([sys.executable, "-c", CLUSTER, str(tmp_path)], env={**os.environ, "RAY_TMPDIR": str(link)})
    try:
        wait_for(tmp_path / "up")
        assert startups._controllers(logs) == set() and logs.dirs  # the cluster's log directory, from its raylet
        (tmp_path / "go").touch()
        wait_for(tmp_path / "ran")
        first = startups._controllers(logs)  # the brief one only in its log, the other running and logged
        assert len(first) == 2 and all(Path(p).name.startswith("worker-") for p in first), first
        again = startups._controllers(logs)
        assert again <= first and len(again) == 1  # the running one, by the same name: not a second start-up
    finally:
        (tmp_path / "end").touch()
        proc.wait(timeout=60)
        link.unlink()
        shutil.rmtree(real, ignore_errors=True)


def test_a_controllers_log_moved_to_old_or_read_before_it_is_one_start_up(tmp_path, monkeypatch):
    """Ray's log monitor moves an ended process's log to `logs/old/`; a running controller whose stdout could not be
    read is named by its pid, and its log, read later, is the same controller."""
    counter = startups.StartupCounter()
    counter.logs.dirs.add(tmp_path)
    log = tmp_path / "worker-0a1b-01000000-4242.out"
    log.write_bytes(b":job_id:01000000\n" + startups.MARK + b"\n")
    counter.poll()
    assert counter.by_test["(between tests)"] == 1 and "worker-0a1b-01000000-4242.out" in counter.seen
    (tmp_path / "old").mkdir()
    log.rename(tmp_path / "old" / log.name)
    counter.poll()  # the same file, read again where it now is
    assert counter.by_test["(between tests)"] == 1, counter.found
    assert startups.log_name(f"{tmp_path}/old/{log.name} (deleted)") == log.name

    seen = iter([{"pid 5151 777": "running, its stdout unreadable"}, {"worker-9f-01000000-5151.out": "its log"}])

    def controllers(logs=None, where=None):
        found = next(seen)
        where.update(found)
        return set(found)

    monkeypatch.setattr(startups, "_controllers", controllers)
    counter.poll()
    counter.poll()
    assert counter.by_test["(between tests)"] == 2, counter.found  # the bare pid and its log: one more, not two
    assert [line for line in counter.of("(between tests)") if "5151" in line] == [
        "pid 5151 777 (running, its stdout unreadable; its log its log)"
    ]


def titled_later(stdout) -> subprocess.Popen:
    """A process that takes the title `ray::TrainController` (keeping its pid) once a line reaches its stdin."""
    return subprocess.Popen(
        ["bash", "-c", 'read; exec -a "ray::TrainController" sleep 60'], stdin=subprocess.PIPE, stdout=stdout
    )


def take_title(proc: subprocess.Popen) -> None:
    proc.stdin.write(b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 10
    while not Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"ray::TrainController"):
        assert time.monotonic() < deadline, "the process never took its title"
        time.sleep(0.02)


@pytest.mark.parametrize("order", ["running first", "log first (CI's)", "in one poll"])
def test_a_controller_seen_with_the_raylets_stdout_and_in_its_log_is_one_start_up(tmp_path, order):
    """A controller's process seen with the raylet's `raylet.out` as its stdout (once in CI, after its log had been
    read: one process counted twice, by its log and as `raylet.out`) is named by its pid, and its log, read before,
    after or in the same poll, is the same controller."""
    counter = startups.StartupCounter()
    counter.logs.dirs.add(tmp_path)
    with open(tmp_path / "raylet.out", "wb") as out:
        proc = titled_later(out)
    log = tmp_path / f"worker-5e-01000000-{proc.pid}.out"
    try:
        if order == "log first (CI's)":
            log.write_bytes(startups.MARK + b"\n")
            counter.poll()  # the log, its process not yet titled
            take_title(proc)
        elif order == "running first":
            take_title(proc)
            counter.poll()  # running, its stdout the raylet's: named by its pid
            log.write_bytes(startups.MARK + b"\n")
        else:
            take_title(proc)
            log.write_bytes(startups.MARK + b"\n")
        counter.poll()
        mine = [line for line in counter.of("(between tests)") if str(proc.pid) in line]
        assert counter.by_test["(between tests)"] == 1 and len(mine) == 1, counter.found
    finally:
        proc.kill()
        proc.wait()
