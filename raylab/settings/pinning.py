"""--pin-cpus: a trial's training processes on CPUs of their own, the rest of the cluster off them.

On a small machine the cluster's other processes (Ray's raylet, GCS, dashboard and agents, Ray Train's controller,
raylab's sink and queue: about a quarter of a core beside a 1-worker trial on a 2-core VM, none of it much, each
waking often) run now and then on the CPU the training step runs on, and the step moves between CPUs; a plain loop
on a quiet machine has neither. With --pin-cpus, where raylab started the cluster in this process (so its processes
are this driver's descendants) and the cluster is one node, every thread of each training process is held to
`--threads` CPUs of its own and every other process of the cluster (the driver too) to the CPUs left, for the
trial's steps, as Kubernetes' CPU manager gives a pod exclusive CPUs. The workers take the highest-numbered CPUs
(interrupts favour CPU 0). A machine without a CPU to spare beyond the trial's processes x threads is left alone.
At the trial's end every process gets back the CPUs the driver started with. Threads and processes started
meanwhile inherit their parent's CPUs, so a worker's new threads stay on its CPUs and Ray's new processes off them.

Recorded: the param pin_cpus (asked for) and the tag cpu_pinning (what was done, read back from the kernel, or
why it was not).
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def affinity_supported() -> bool:
    return hasattr(os, "sched_setaffinity") and PROC.is_dir()


def refusal(nodes: int, owns_cluster: bool) -> str | None:
    """Why a trial's CPUs cannot be pinned on this cluster, or None."""
    if not affinity_supported():
        return "this OS sets no CPU affinity (Linux only)"
    if not owns_cluster:
        return (
            "the cluster was not started by this driver (--address, RAY_ADDRESS): its processes are not raylab's "
            "to move"
        )
    if nodes != 1:
        return f"the cluster has {nodes} nodes: CPUs are pinned on a one-node cluster only"
    return None


def descendants(root: int) -> set[int]:
    """`root` and every process below it (from /proc/PID/stat's parent pids)."""
    children: dict[int, list[int]] = {}
    for p in PROC.iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(p.name))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, ()))
    return out


def set_cpus(pid: int, cpus: set[int]) -> int:
    """Every thread of `pid` to `cpus`; the threads set (one that ended meanwhile is passed over)."""
    done = 0
    try:
        tids = [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
    except OSError:
        return 0
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            done += 1
        except OSError:
            continue
    return done


def cpus_of(pid: int) -> set[int]:
    """The CPUs the threads of `pid` may run on, together (empty: the process is gone)."""
    out: set[int] = set()
    try:
        tids = [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
    except OSError:
        return out
    for tid in tids:
        try:
            out |= os.sched_getaffinity(tid)
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    return (PROC / str(pid)).is_dir()


def span(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


class Pinning:
    """One trial's pinning: `apply(pids)` as its training processes appear (again after a restart), `end()` when it
    is over (the tag, and every process back on the driver's CPUs)."""

    def __init__(self, asked: bool, threads: int, why_not: str | None = None, root: int | None = None):
        self.asked, self.threads, self.why_not = asked, threads, why_not
        self.root = os.getpid() if root is None else root
        self.allowed = sorted(os.sched_getaffinity(0)) if affinity_supported() else []
        self.pinned: tuple[int, ...] = ()
        self.done: str | None = None  # what the last apply did, read back

    def waiting(self) -> bool:
        """Asked, possible, and no process pinned yet (the driver looks for the trial's processes more often)."""
        return self.asked and self.why_not is None and not self.pinned

    def apply(self, pids: list[int]) -> None:
        """Pins the live ones of `pids` (the trial's training processes, in the order they started), each to
        `threads` CPUs of its own, and the driver's other descendants to the CPUs left; again whenever they change."""
        if not self.asked or self.why_not is not None:
            return
        live = tuple(p for p in pids if alive(p))
        if not live or live == self.pinned:
            return
        need = len(live) * self.threads
        if need >= len(self.allowed):
            self.why_not = (
                f"{len(live)} training process(es) x {self.threads} CPU(s) leave no CPU of the "
                f"{len(self.allowed)} for the rest of the cluster"
            )
            self.restore()
            return
        own, rest = self.allowed[-need:], set(self.allowed[:-need])
        others = descendants(self.root) - set(live)
        for pid in others:
            set_cpus(pid, rest)
        for i, pid in enumerate(live):
            set_cpus(pid, set(own[i * self.threads : (i + 1) * self.threads]))
        self.pinned = live
        got = [span(cpus_of(pid)) for pid in live]
        moved = [pid for pid in others if alive(pid)]
        strays = sum(1 for pid in moved if not cpus_of(pid) <= rest)
        self.done = (
            f"training processes on CPU {'; '.join(got)}; the cluster's {len(moved)} other processes "
            f"(the driver's) on CPU {span(rest)}" + (f", {strays} of them not moved" if strays else "")
        )

    def restore(self) -> None:
        """Every process below the driver (the driver too) back on the CPUs it started with."""
        if self.pinned:  # (after a restore there is nothing to give back)
            for pid in descendants(self.root):
                set_cpus(pid, set(self.allowed))
        self.pinned = ()

    def end(self) -> str:
        """Restores every process's CPUs; the cpu_pinning tag: what was done, or why not."""
        self.restore()
        if not self.asked:
            return "off"
        if self.why_not is not None:
            return f"not applied: {self.why_not}"
        return self.done or "not applied: no training process was seen"


def for_run(cfg, per: int, framework: str) -> Pinning:
    """A trial's or plain script's Pinning under --pin-cpus and the cluster it runs beside: `per` CPUs for each of
    its processes (what each reserves: --threads, or a replica's each for a kind that holds its replicas in one
    process, as tf:mirrored), and the CPUs its framework keeps busy beside them (Framework.side_cpus)."""
    from raylab import registry

    per += registry.framework(framework).side_cpus
    if not cfg.pin_cpus:
        return Pinning(False, per)
    import ray

    from raylab.runtime import cluster

    nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
    return Pinning(True, per, refusal(nodes, cluster.owns_cluster()))
