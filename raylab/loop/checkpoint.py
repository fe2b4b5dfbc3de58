"""Checkpoints of a worker's loop: the framework's state (a Saver), the loop's own (LoopState), when to
take one, restoring from one, and what may be sent only once one is safe (Handoff)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from raylab.loop.report import builtins_only
from raylab.loop.state import LoopState

META = "raylab.json"  # the loop's own part of a checkpoint: its LoopState and the timing so far
INTERVAL_WAIT_S = 300  # how long a rank waits for rank 0 to set the checkpoint interval


@dataclass
class Saver:
    """A backend's training state in its framework's own format, for checkpoints and restarts.

    save(directory, rank) is called on every rank (some frameworks need every rank to take part); rank 0's
    directory becomes the checkpoint, so what rank 0 holds is what is kept. load(directory) restores the
    state on every rank (the loop then moves the batch source on past the checkpoint's steps).
    before_report(), on rank 0, runs before each checkpoint's ray.train.report (parameter-server hosts take
    part in that report too).
    """

    save: Callable[[str, int], None]
    load: Callable[[str], None]
    before_report: Callable[[], None] | None = None


def announce_report(sink, group: str) -> Callable[[], None]:
    """A Saver's before_report for a parameter-server trial: rank 0 tells its group's other processes that a
    checkpoint report is coming (they take part through join_reports)."""
    import ray

    return lambda: ray.get(sink.report_round.remote(group), timeout=60)


def join_reports(sink, group: str, made: int) -> int:
    """On a process that does not checkpoint (a parameter-server host, a tf:ps server): ray.train.report waits
    for every rank of the group, so it reports once for each checkpoint report rank 0 announced since the
    `made` it reported already; the reports made so far."""
    import ray
    import ray.train

    for _ in range(ray.get(sink.report_rounds.remote(group), timeout=60) - made):
        ray.train.report({})
        made += 1
    return made


class Handoff:
    """Runs what may only happen once a checkpoint is safe: once Ray Train's controller has taken the report.

    ray.train.report returns when the checkpoint is in storage and its report is in this worker's result
    queue; the controller takes it from there at its next poll (every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S,
    2 s by default). A worker lost before that poll restarts from the checkpoint before, so an epoch sent
    to the driver at report time could be trained twice and its lost time under-counted. Sends wait here,
    in a thread, so training does not; finish() sends what is left when the training function ends (the
    controller reads the last reports before it calls the trial finished). Without the queue (another
    Ray Train version) they are sent at once.
    """

    def __init__(self):
        try:
            from raylab._ray import get_train_context

            self.queue = get_train_context().get_result_queue()
        except Exception:  # noqa: BLE001 - a private API: without it, send at once
            self.queue = None
        self.pending: list[Callable[[], Any]] = []
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.finishing = False

    def after_report(self, *sends: Callable[[], Any]) -> None:
        if self.queue is None:
            for send in sends:
                send()
            return
        with self.lock:
            self.pending.extend(sends)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="raylab-handoff", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while True:
            with self.lock:
                batch, self.pending = self.pending, []  # each was reported before it was added
            if not batch:
                return
            with self.queue.all_tasks_done:  # task_done() is called when the controller polls the report
                while self.queue.unfinished_tasks and not self.finishing:
                    self.queue.all_tasks_done.wait(0.5)
            for send in batch:
                send()

    def finish(self) -> None:
        self.finishing = True
        if self.queue is not None:
            with self.queue.all_tasks_done:
                self.queue.all_tasks_done.notify_all()
        if self.thread is not None:
            self.thread.join(timeout=60)


class Checkpointer:
    """Restore at the start, save at epoch ends and every cfg.checkpoint_every_s inside an epoch, and send
    what waits on a saved checkpoint. Off (every method a no-op) without a saver or with cfg.checkpoint off.

    The interval inside an epoch is in steps, the same on every rank (all must checkpoint at the same
    window): rank 0 turns seconds into steps once, from its first steady window, and every rank reads it
    from the trial's sink.
    """

    def __init__(self, cfg, rank: int, saver: Saver | None):
        self.cfg, self.rank, self.saver = cfg, rank, saver
        self.on = saver is not None and cfg.checkpoint
        self.handoff = Handoff() if self.on else None
        self.saved_done = 0  # the trial's steps when the last checkpoint was taken
        self.resumed_from: int | None = None  # the step this attempt started from, when it restored one
        self.last_mb: float | None = None  # the size of rank 0's last checkpoint

    def restore(self, chrono, batches) -> LoopState:
        """The loop's state: from the checkpoint Ray Train restarted this worker group from (the framework's
        state loaded, the timing carried, the batch source moved past its steps), else a fresh one. A checkpoint
        is its trial's (`trial`: its MLflow run id): in a warm worker group the last one may be an earlier
        trial's, and a trial never starts from another's."""
        import ray.train

        restored = ray.train.get_checkpoint() if self.on and self.cfg.restorable else None
        if restored is None:
            return LoopState()
        with restored.as_directory() as d:
            meta = json.loads((Path(d) / META).read_text())
            if meta.get("trial", self.cfg.run_id) != self.cfg.run_id:  # an earlier trial's, in a warm group
                return LoopState()
            self.saver.load(d)
        state = LoopState.from_json(meta["state"])
        if batches is not None:
            batches.restart(state.done)
        chrono.carried = meta["timing"]
        self.saved_done = self.resumed_from = state.done
        return state

    def due(self, state: LoopState, own: int, chrono, step: int, steps_per_epoch: int) -> bool:
        """Whether to checkpoint now, at a window's end inside an epoch (`own`: steps this attempt trained)."""
        if not self.on or self.cfg.checkpoint_every_s <= 0 or step >= steps_per_epoch:
            return False
        if state.interval is None and own >= chrono.warmup + self.cfg.window:
            state.interval = self._calibrate(chrono)
        return state.interval is not None and state.done - self.saved_done >= state.interval

    def save(self, state: LoopState, chrono, phases, after: tuple[Callable[[], Any], ...] = ()) -> None:
        """Every rank saves and reports; rank 0's directory, with the loop's state, becomes the checkpoint.
        `after` runs once the controller has taken it (rank 0)."""
        import ray.train

        t0 = time.perf_counter()
        timing = chrono.state()
        timing.setdefault("phases", phases.summary(timing["startup_s"]))
        kept = dataclasses.replace(state, checkpoints=state.checkpoints + 1)  # a restart from it counts it
        with tempfile.TemporaryDirectory(prefix="raylab-checkpoint-") as d:
            self.saver.save(d, self.rank)
            if self.rank == 0:
                (Path(d) / META).write_text(
                    json.dumps(builtins_only({"state": kept.to_json(), "timing": timing, "trial": self.cfg.run_id}))
                )
                if self.saver.before_report is not None:
                    self.saver.before_report()
                self.last_mb = room_for(d, self.cfg.storage)
            ray.train.report(
                {"epoch": state.epoch, "step": state.done},
                checkpoint=ray.train.Checkpoint.from_directory(d) if self.rank == 0 else None,
            )
        state.checkpoint_s += time.perf_counter() - t0
        state.checkpoints += 1
        self.saved_done = state.done
        if self.rank == 0:
            taken, sink = time.time(), self.cfg.sink
            self.handoff.after_report(lambda: sink.checkpointed.remote(taken), *after)

    def finish(self) -> None:
        if self.handoff is not None:
            self.handoff.finish()

    def describe(self) -> str:
        """What the trial records as its checkpointing."""
        if self.on:
            every = self.cfg.checkpoint_every_s
            return "epoch ends" + (f" and every {every:g} s" if every > 0 else "")
        return "off (--max-failures 0)" if self.saver is not None else "not supported by this trial"

    def figures(self, state: LoopState) -> dict:
        out = {"checkpoints": state.checkpoints, "checkpoint_s": state.checkpoint_s} if self.on else {}
        if self.last_mb is not None:
            out["checkpoint_mb"] = self.last_mb
        if self.resumed_from is not None:
            out["resumed_from_step"] = self.resumed_from
        return out

    def _calibrate(self, chrono) -> int:
        import ray

        cfg = self.cfg
        if self.rank == 0:
            secs, k = chrono.windows[-1]
            steps = int(cfg.checkpoint_every_s * k / max(secs, 1e-9)) // cfg.window * cfg.window
            ray.get(cfg.sink.set_interval.remote(max(cfg.window, steps)), timeout=60)
        deadline = time.monotonic() + INTERVAL_WAIT_S
        while (interval := ray.get(cfg.sink.interval.remote(), timeout=60)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank 0 did not set the checkpoint interval within {INTERVAL_WAIT_S} s")
            time.sleep(0.05)
        return interval


ROOM_MARGIN_MB = 64  # left free beside a checkpoint: the disk is the node's, not only this trial's


class NoRoomError(RuntimeError):
    """A checkpoint that does not fit where it goes: the trial's own failure (not restarted: it would not fit
    again), named before Ray Train starts writing it."""


def room_for(directory: str, storage: str | None) -> float:
    """The checkpoint in `directory`'s size in MB, once checked against the free space of `storage` (a local
    path; a URI's store is not looked at). Ray Train writes the new checkpoint before it removes the one before."""
    import os
    import shutil

    size_mb = sum(f.stat().st_size for f in Path(directory).rglob("*") if f.is_file()) / 2**20
    if storage and "://" in storage:
        return size_mb
    where = Path(os.path.expanduser(storage or "~/ray_results"))
    while not where.exists() and where != where.parent:
        where = where.parent
    free_mb = shutil.disk_usage(where).free / 2**20
    if free_mb < size_mb + ROOM_MARGIN_MB:
        raise NoRoomError(
            f"a checkpoint of {size_mb:,.0f} MB does not fit in {storage or '~/ray_results'} "
            f"({free_mb:,.0f} MB free); free some space, point --storage elsewhere, or run with "
            "--max-failures 0 (no checkpoints)"
        )
    return size_mb
