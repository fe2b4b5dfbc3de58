"""What ran beside a trial on its node while it was timed: other work's cores and the hypervisor's stolen time.

A figure is only as good as the quiet it was measured in: two jobs on one node each ran at half their speed
alone, and nothing said so. Each worker reads its node twice, as its first steady window starts and as it
reports, and sends the difference (two reads, no thread beside the steps):

- `/proc/stat`'s first line: the node's busy and stolen CPU time over the window (steal is time the hypervisor
  gave another guest while this one wanted to run);
- its own process and its children (`/proc/<pid>/stat` utime + stime, every thread included): the trial's own
  work, which the driver adds up over the node's ranks and takes from the busy time;
- Ray's own daemons (the GCS, the raylet, the dashboard and its agents, idle prestarted workers) and this job's
  other Ray processes (its Ray Train controller, the trial's sink, Ray Data's tasks for a streamed trial: a Ray worker
  says its job in RAY_JOB_ID from its start, before it takes its ray:: title, and one started before any job,
  ffffffff, serves raylab's small actors): the upkeep of the cluster and of the trial, kept apart so that "other
  work" is what is neither this trial nor Ray nor this job: another job's trial (its workers carry its own job id),
  a compile, a user's process.

The driver turns the ranks' reads into the trial's figures (raylab/record/figures.py `beside_figures`); the
parity report refuses a comparison that rests on a trial measured beside more than a stated share of a core
(raylab/compare/parity.py BESIDE_MAX_CORES).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc's CPU times are in these
# Ray's long-running processes: by their command name (/proc/PID/comm, 15 characters) or their command line
DAEMON_NAMES = ("gcs_server", "raylet")
DAEMON_CMDLINES = (
    b"ray/dashboard/",
    b"log_monitor.py",
    b"autoscaler/_private/monitor.py",
    b"runtime_env/agent",
    b"ray::IDLE",
    b"ray/_private/log_monitor",
)


def node_ticks() -> tuple[int, int, int] | None:
    """(busy, stolen, all) CPU ticks of the whole node since boot, from /proc/stat; None where there is none."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal, user + nice + system + idle + iowait + irq + softirq + steal


def process_ticks(pid: int | str) -> tuple[int, str] | None:
    """(utime + stime ticks, start time) of one process, every thread of it; None where it is gone."""
    try:
        after = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(after[11]) + int(after[12]), after[19]


def descendants(pid: int) -> list[int]:
    """pid and every process below it (its children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(proc.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


# A Ray worker process before it takes its title (ray::IDLE, ray::<actor>): Python running Ray's worker script, for
# up to a second or more of imports as it starts (an actor's new process, a prestarted worker). It says its job in
# RAY_JOB_ID as a titled one does.
STARTING_WORKER = (b"ray/_private/workers/default_worker.py", b"ray/_private/workers/setup_worker.py")
NIL_JOB = b"ffffffff"  # a Ray worker started before a job was given to it (prestarted): raylab's small actors


def is_upkeep(pid: str, job: bytes | None) -> bool:
    """Whether a process is one of Ray's daemons or a Ray process of this job (`job`: its hex id) or of none."""
    proc = Path("/proc") / pid
    try:
        if (proc / "comm").read_text().strip() in DAEMON_NAMES:
            return True
        cmdline = (proc / "cmdline").read_bytes()
        if any(mark in cmdline for mark in DAEMON_CMDLINES):
            return True
        if not (cmdline.startswith(b"ray::") or any(mark in cmdline for mark in STARTING_WORKER)):
            return False
        env = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    said = next((v.split(b"=", 1)[1] for v in env if v.startswith(b"RAY_JOB_ID=")), NIL_JOB)
    # A Ray Train worker of this job is this trial's other rank on the node (the driver takes those back out:
    # figures.beside_figures) or an idle warm group's; another job's is another job's trial: other work
    return said == NIL_JOB or (job is not None and said == job)


def upkeep(job: bytes | None, own: set[str]) -> dict[str, tuple[int, str]]:
    """{pid: (ticks, start)} of Ray's daemons and this job's (or no job's) Ray processes on this node, the trial's
    own (`own`) and its ranks aside."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and proc.name not in own and is_upkeep(proc.name, job):
            got = process_ticks(proc.name)
            if got is not None:
                out[proc.name] = got
    return out


def used(before: dict, after: dict) -> int:
    """Ticks used between two reads of {pid: (ticks, start)}: a process that started in between from its start."""
    return sum(t - (before[p][0] if p in before and before[p][1] == s else 0) for p, (t, s) in after.items())


def this_job() -> bytes | None:
    """The hex id of the Ray job this process works for; None outside Ray (a process that never imported ray, such as
    a plain script, does not import it here)."""
    if "ray" not in sys.modules:
        return None
    try:
        import ray

        return ray.get_runtime_context().get_job_id().encode() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - no job to tell apart: every Ray process of a job is then other work
        return None


class Beside:
    """Reads this worker's node as its timed window begins (`begin`, once) and as it ends (`end`)."""

    def __init__(self, pid: int | None = None, job: str | None = None):
        self.pid = pid or os.getpid()
        self.job = job.encode() if job else None  # this Ray job's hex id (read at begin() in a Ray worker)
        self.start: tuple | None = None

    def begin(self) -> None:
        if self.start is None:
            if self.job is None:
                self.job = this_job()
            self.start = self.read()

    def read(self) -> tuple:
        own = {str(p): t for p in descendants(self.pid) if (t := process_ticks(p)) is not None}
        return time.monotonic(), node_ticks(), own, upkeep(self.job, set(own))

    def end(self) -> dict | None:
        """This worker's reads over its window: node busy/steal/all ticks, its own and Ray's and its job's ticks, the
        window's seconds and the node's CPUs; None where the window never began or /proc cannot be read."""
        if self.start is None:
            return None
        t0, node0, own0, ray0 = self.start
        t1, node1, own1, ray1 = self.read()
        if node0 is None or node1 is None or node1[2] <= node0[2]:
            return None
        me = str(self.pid)
        return {
            "seconds": t1 - t0,
            "busy": node1[0] - node0[0],
            "steal": node1[1] - node0[1],
            "all": node1[2] - node0[2],
            "own": used(own0, own1),
            "ray": used(ray0, ray1),
            # the worker process alone, its children aside: what another rank's read counts as this job's
            "own_main": used({me: own0[me]} if me in own0 else {}, {me: own1[me]} if me in own1 else {}),
            "cpus": os.cpu_count() or 1,
            "tick": TICK,
        }
