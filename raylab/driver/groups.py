"""Warm worker groups: trials that can share worker processes run one after another in one Ray Train run.

Every cold trial is one Ray Train `fit()`, which starts a controller, its helpers and the workers, each a new
interpreter importing Ray, Train and the framework: seconds before the first step. Ray never hands an actor's
process to another actor, and Train keeps no worker group between runs, so the processes are kept by keeping the
run: a warm group's training function (raylab/loop/group_worker.py) takes the group's trials from a queue (`GroupQueue`,
an actor the driver fills) and runs each in turn, resetting between them what a trial must not inherit.

Which trials share a group, and which stay cold and why: raylab/driver/sharing.py.

Each trial is still its own MLflow run with everything it records cold, plus `start` (cold: the first of its
group, or a trial with processes of its own; warm: processes an earlier trial started) and `group_index` (its
place in its group, 0 the first). A trial that fails or is killed ends its group: the next trial of its key starts
a new group, cold. A lost worker restarts the group (the trial's own restart budget, --max-failures, as for a cold
trial: an earlier trial's restarts do not count), which goes on with the trial it was running, from that trial's
own checkpoint; lost while the group is idle, it ends the group
(raylab/driver/policy.py: nothing to go on with), and the next trial of its key starts a new one, saying why.

Reservations: on a single node, where raylab runs one trial at a time, a group's workers reserve 1/LIVE of their
CPUs (and GPUs) in Ray's accounting, so up to LIVE groups stay alive at once (the A B B A order of --repeats is
kept, every kind warm); the trial that runs is alone on the machine, with the threads it asked for. Before a trial
that needs more than what is free (a cold one, a new group), the least recently used idle groups end.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass, field

import ray

from raylab.driver.sharing import cold_reason, group_key, setup_of

# Warm groups alive at once on one node; each group's workers reserve this share of their resources.
LIVE = 4
# How long the driver waits for an ended group's resources to come back to Ray.
RELEASE_WAIT_S = 60.0
# How long it waits for the run of a group whose trial failed or was killed to end (an interrupt must not wait).
END_WAIT_S = 5.0


@ray.remote(num_cpus=0)
class GroupQueue:
    """A warm group's trials, handed to its workers in order: the driver puts, every rank takes the same one.

    An item is (kind, WorkerConfig). Ranks say when they start and finish one; the driver waits for every rank's
    `finished`. Failures Ray Train reports (raylab/failure.py's Policy) go to the sink of the trial running.
    """

    def __init__(self, ranks: int):
        self.ranks = ranks
        self.items: list = []
        self.finished_by: dict[int, set] = {}
        self.failed: dict[int, str] = {}  # index -> what a --batch max probe ran into (the group went on)
        self.started_at: dict[int, float] = {}
        self.closed = False
        self.lost: str | None = None  # what ended the group while no trial was running (Policy: not restarted)
        self.changed = asyncio.Condition()

    async def put(self, item) -> int:
        async with self.changed:
            self.items.append(item)
            self.changed.notify_all()
        return len(self.items) - 1

    async def close(self) -> None:
        async with self.changed:
            self.closed = True
            self.changed.notify_all()

    async def take(self, index: int, wait_s: float):
        """The item at `index`; None once the group is closed; "wait" if none came within wait_s."""
        async with self.changed:
            try:
                await asyncio.wait_for(self.changed.wait_for(lambda: index < len(self.items) or self.closed), wait_s)
            except asyncio.TimeoutError:
                return "wait"
        return self.items[index] if index < len(self.items) else None

    def first_unfinished(self) -> int:
        i = 0
        while len(self.finished_by.get(i, ())) >= self.ranks:
            i += 1
        return i

    def started(self, index: int, rank: int, when: float) -> None:
        self.started_at.setdefault(index, when)

    async def finished(self, index: int, rank: int, failure: str | None = None) -> None:
        async with self.changed:
            self.finished_by.setdefault(index, set()).add(rank)
            if failure:
                self.failed[index] = failure
            self.changed.notify_all()

    def failure_of(self, index: int) -> str | None:
        return self.failed.get(index)

    def done(self, index: int) -> bool:
        return len(self.finished_by.get(index, ())) >= self.ranks

    async def done_within(self, index: int, wait_s: float) -> bool:
        """done(index), waiting up to wait_s for it: the driver hears the moment the last rank finishes, instead of
        asking ten times a second (each ask a task here and on the driver, on the machine the steps run on)."""
        async with self.changed:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait_for(lambda: self.done(index)), wait_s)
        return self.done(index)

    def failure(self, when: float, what: str, why: str) -> None:
        """A failure of the group's run, told to the trial it hit; kept here when it hit no trial (idle)."""
        index = self.first_unfinished()
        if index < len(self.items):
            self.items[index][1].sink.failure.remote(when, what, why)
        else:
            self.lost = what

    def running(self) -> int | None:
        """The trial handed over and not yet finished by every rank, by its place in the group (None: idle)."""
        index = self.first_unfinished()
        return index if index < len(self.items) else None

    def lost_while_idle(self) -> str | None:
        return self.lost


@dataclass
class WarmGroup:
    """One warm group on the driver: its queue, the thread its Ray Train run's fit() runs in, what it ran."""

    key: tuple
    name: str  # its Ray Train run's name (the first trial's run id)
    queue: object  # its GroupQueue
    setup: str = ""  # the trial whose set-up its processes have (setup_of), by name: "torch:ddp x1"
    trials: int = 0  # trials handed to it
    used: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None
    error: BaseException | None = None
    result: object = None

    def start(self, trainer) -> None:
        def fit():
            try:
                self.result = trainer.fit()
            except BaseException as e:  # noqa: BLE001 - handed to the trial waiting on it
                self.error = e

        self.thread = threading.Thread(target=fit, daemon=True, name=f"raylab-group-{self.name}")
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def lost_while_idle(self) -> str | None:
        """What ended it between trials (a worker process lost while it waited: not restarted), else None."""
        try:
            return ray.get(self.queue.lost_while_idle.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - its queue is gone with it
            return None

    def submit(self, kind: str, wcfg) -> int:
        self.trials += 1
        self.used = time.monotonic()
        return ray.get(self.queue.put.remote((kind, wcfg)), timeout=60)

    def wait(self, index: int) -> str | None:
        """Until every rank has finished trial `index`; what ended the group's run first is raised. Returns the
        line of a probe's failure the group went on after (raylab/loop/group_worker.py), else None."""
        while not ray.get(self.queue.done_within.remote(index, 1.0), timeout=60):  # its run's end: seen within 1 s
            if not self.alive:
                if ray.get(self.queue.done.remote(index), timeout=60):
                    break
                raise self.error or RuntimeError(f"warm group {self.name} ended before its trial finished")
        self.used = time.monotonic()
        return ray.get(self.queue.failure_of.remote(index), timeout=60)

    def close(self, timeout_s: float = RELEASE_WAIT_S) -> None:
        """Its workers' loops return, its run ends, its queue goes."""
        self.closing()
        if self.thread is not None:
            self.thread.join(timeout=timeout_s)
        try:
            ray.kill(self.queue)
        except Exception:  # noqa: BLE001
            pass

    def closing(self) -> None:
        """Tells its workers there is no next trial (their loops return, and its run ends)."""
        try:
            ray.get(self.queue.close.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead cluster: the run is gone with it
            pass


class Groups:
    """The invocation's warm groups by key: which one a trial joins, which end to make room, all ended at the end."""

    def __init__(self, cfg, one_node: bool, limit: int):
        self.cfg, self.one_node, self.limit = cfg, one_node, limit
        self.live: dict[tuple, WarmGroup] = {}
        self.why_new: str | None = None  # why find()'s trial starts a new group, where an old one ended by itself

    def share(self) -> int:
        """The share of its resources a group's worker reserves (one node: LIVE groups fit beside each other)."""
        return LIVE if self.one_node else 1

    def find(self, spec, cfg=None) -> tuple[WarmGroup | None, str | None]:
        """(the live group the trial joins, or None: it starts one or runs cold; why it is cold, or None). cfg: its
        settings where they are not the invocation's (a --batch max probe's)."""
        cfg, self.why_new = cfg or self.cfg, None
        reason = cold_reason(cfg, spec, self.one_node, self.limit)
        if reason:
            return None, reason
        group = self.live.get(group_key(cfg, spec, self.cfg.trials))
        lost = group.lost_while_idle() if group is not None else None
        if group is not None and (lost or not group.alive):  # it lost a process while idle, or its last trial failed
            self.live.pop(group.key)
            group.close(timeout_s=END_WAIT_S)  # its queue goes too; Ray Train has ended its workers
            if lost:
                self.why_new = (
                    f"its warm group ({group.setup}, {group.trials} trial(s)) lost a worker process while "
                    f"idle and ended ({lost}): a new group"
                )
            group = None
        return group, None

    def begin(self, spec, name: str, build, cfg=None) -> WarmGroup:
        """A new group for the trial's key; build(queue, setup) -> the group's Ray Train trainer, its processes
        set up as the TrialSpec `setup`'s."""

        key, setup = group_key(cfg or self.cfg, spec, self.cfg.trials), setup_of(spec, self.cfg.trials)
        self.make_room(keep=key, groups=1)
        layout = setup.layout(self.cfg)
        group = WarmGroup(key, name, GroupQueue.remote(layout.ray_workers), setup.name)
        group.start(build(group.queue, setup))
        self.live[key] = group
        return group

    def make_room(self, keep: tuple | None = None, groups: int = 0, need: dict | None = None) -> None:
        """Ends the least recently used idle groups until `groups` more fit beside the live ones (at most LIVE) and
        `need` ({"CPU": n, ...}, a cold trial's) is free in Ray."""
        idle = sorted((g for k, g in self.live.items() if k != keep), key=lambda g: g.used)
        while idle and (len(self.live) + groups > LIVE or need and not self.free(need)):
            group = idle.pop(0)
            self.live.pop(group.key)
            group.close()
            if need:
                self.wait_free(need)

    @staticmethod
    def need(cfg, spec) -> dict:
        """What a cold trial reserves in Ray, all its workers together (and a streamed trial's CPU for Ray Data)."""
        from raylab.driver.resources import DATA_CPUS, worker_resources

        strategy = spec.strategy
        layout = spec.layout(cfg)
        cpus, gpus, extra = worker_resources(strategy, layout, cfg)
        n = layout.ray_workers
        return {
            "CPU": cpus * n + (DATA_CPUS if cfg.streamed else 0),
            "GPU": gpus * n,
            **{k: v * n for k, v in extra.items()},
        }

    @staticmethod
    def free(need: dict) -> bool:
        free = ray.available_resources()
        return all(free.get(k, 0) + 1e-6 >= v for k, v in need.items() if v)

    def wait_free(self, need: dict) -> None:
        deadline = time.monotonic() + RELEASE_WAIT_S
        while not self.free(need) and time.monotonic() < deadline:
            time.sleep(0.1)

    def end(self, group: WarmGroup) -> None:
        """Ends a group whose trial failed or was killed: the next trial of its key starts a new one, cold."""
        if self.live.get(group.key) is group:
            self.live.pop(group.key)
        group.close(timeout_s=END_WAIT_S)  # a killed trial's run may still be in its step: the cluster ends it

    def close_all(self) -> None:
        """Every group ends, all at once (each run's shutdown beside the others')."""
        for group in self.live.values():
            group.closing()
        for group in list(self.live.values()):
            group.close()
        self.live.clear()
