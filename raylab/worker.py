"""What every worker shares, whatever the framework: its config, the epoch loop, reporting.

Backends supply train(k), which runs k training steps and leaves their summed loss and metric
statistics on the device, and read(), the one host copy of those sums; this module cuts each
epoch into windows of `window` steps, reads once per window, times windows with the same Chrono
and reports the same names. Only rank 0 reports: one child run per trial, never one per rank.
"""

from __future__ import annotations

import json
import numbers
import os
import platform
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from raylab.task import Task
from raylab.timing import Chrono, Phases

PROGRESS_EVERY_S = 2.0  # how often rank 0 sends a progress line to the driver
ALIVE_EVERY_S = 0.5  # how often rank 0 tells the sink it is still training (a failure's time, to this precision)
META = "raylab.json"  # the loop's own part of a checkpoint: position, sums, timing, the epochs so far


@dataclass
class WorkerConfig:
    """The small picklable config each worker receives (never driver objects)."""

    trial: str  # e.g. "tf:mwms x2"
    strategy: str  # e.g. "mwms"
    task: Task  # the recipe's task as declared: models, loss, optimizer, schedule, metrics, preprocessing
    data_refs: dict  # object refs of x_train, y_train, x_test, y_test
    replicas: int  # replicas in sync across the whole trial
    batch_per_replica: int
    epochs: int
    threads: int  # intra-op threads per replica
    seed: int
    warmup_steps: int
    trial_start: float  # driver wall clock at trial start
    sink: Any  # TrialSink actor handle
    device: str = "cpu"
    precision: str = "fp32"  # asked for; backends record what they applied
    tpu_fallback: str = "error"  # tf:tpu with no TPU found: "error" or "mirrored" (recorded)
    ps: int = 0  # parameter servers (tf:ps, torch:ps-*)
    steps_per_epoch: int | None = None  # None: one pass over the shard; else the data repeats as needed
    window: int = 32  # training steps between host reads (TF runs them as one tf.function call)
    checkpoint: bool = False  # checkpoint at epoch ends (and every checkpoint_every_s) for restarts
    checkpoint_every_s: float = 600.0  # also checkpoint inside an epoch this often (0: at epoch ends only)

    @property
    def global_batch(self) -> int:
        return self.batch_per_replica * self.replicas

    def steps(self, one_pass: int) -> int:
        """Steps per epoch: the recipe's fixed number, else one pass over the shard."""
        return self.steps_per_epoch or one_pass


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_facts() -> dict:
    # Ray starts workers at nice 15 unless told otherwise; a benchmark must say at what priority it ran.
    return {"host": socket.gethostname(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "niceness": os.nice(0)}


class Reporter:
    """Rank 0's line to the driver: progress (throttled), per-epoch metrics, the final result."""

    def __init__(self, cfg: WorkerConfig, rank: int):
        self.sink = cfg.sink if rank == 0 else None
        self.cfg = cfg
        self._last, self._steps, self._alive = None, 0, 0.0

    def progress(self, epoch: int, step: int, steps: int, loss: float, window: int = 1) -> None:
        """Called at each window's end; throttled; samples/s is averaged over the steps since the last line."""
        now = time.monotonic()
        if self.sink is not None and now - self._alive >= ALIVE_EVERY_S:
            self.sink.alive.remote(time.time())
            self._alive = now
        if self._last is None:  # the first window starts after the first (tracing) step
            self._last = now
            return
        self._steps += window
        if self.sink is not None and now - self._last >= PROGRESS_EVERY_S:
            rate = self._steps * self.cfg.global_batch / (now - self._last)
            self.sink.progress.remote({"epoch": epoch, "epochs": self.cfg.epochs, "step": step, "steps": steps,
                                       "samples_per_sec": rate, "loss": loss})
            self._last, self._steps = now, 0

    def epoch(self, fields: dict) -> None:
        if self.sink is not None:
            self.sink.epoch.remote(fields)

    def result(self, fields: dict) -> None:
        if self.sink is not None:
            import ray

            ray.get(self.sink.result.remote(builtins_only(fields)))  # wait: the driver reads it right after fit()


def builtins_only(value):
    """`value` with only Python's own types inside: numbers as int/float, other objects as str.

    What rank 0 reports is unpickled by the sink and the driver; one framework object in it (torch's
    TorchVersion is a str subclass) makes both import that framework, seconds of CPU at every trial's end.
    """
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        value = value.tolist()  # numpy scalars and arrays: np.bool_ -> bool, np.float32 -> float, ...
    if isinstance(value, dict):
        return {str(k): builtins_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [builtins_only(v) for v in value]
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


def windows(steps_per_epoch: int, window: int, warmup: int, done: int = 0) -> list[int]:
    """One epoch's windows (steps between host reads). The trial's first step is a window of its own
    (tracing, compiling) and the warm-up ends on a window's edge, so steady windows hold no warm-up step;
    a window never crosses an epoch's end."""
    out: list[int] = []
    i = 0
    while i < steps_per_epoch:
        k = min(window, steps_per_epoch - i)
        if done == 0:
            k = 1
        elif done < warmup:
            k = min(k, warmup - done)
        out.append(k)
        i, done = i + k, done + k
    return out


@dataclass
class Saver:
    """A backend's training state in its framework's own format, for checkpoints and restarts.

    save(directory, rank) is called on every rank (some frameworks need every rank to take part); rank 0's
    directory becomes the checkpoint, so what rank 0 holds is what is kept. load(directory, done) restores
    the state on every rank and moves the data order on past `done` steps, so a restarted trial trains
    exactly what an uninterrupted one would. before_report(), on rank 0, runs before each checkpoint's
    ray.train.report (parameter-server hosts take part in that report too).
    """

    save: Callable[[str, int], None]
    load: Callable[[str, int], None]
    before_report: Callable[[], None] | None = None


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
            from ray.train.v2._internal.execution.context import get_train_context

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


def run_epochs(
    cfg: WorkerConfig,
    rank: int,
    steps_per_epoch: int,
    train: Callable[[int], Any],
    evaluate: Callable[[], dict],
    actual: dict,
    checksum: Callable[[], float | list[float] | None],
    results: Callable[[Any, float, str], dict],
    extra: Callable[[], dict] | None = None,
    phases: Phases | None = None,
    read: Callable[[Any], Any] = np.asarray,
    syncs: Callable[[], int] | None = None,
    saver: Saver | None = None,
) -> None:
    """The training loop every backend shares.

    train(k) runs k synchronous training steps and returns their stats summed, left where they were
    computed: [sum of the steps' mean losses, metric numerator, denominator, ...] of this worker's batches
    (the task builder's stats); read(sums) copies them to the host, once per window: the only wait on
    the device between steps. results(sums, steps, "train_") turns an epoch's sums into named figures;
    evaluate() returns val_loss and val_<metric> on the test split (rank 0 only); phases holds the startup
    breakdown the backend marked (None: only `workers` and `other`). syncs(), where given, counts every
    device-to-host read of the process so far (the framework's own counters), else the loop's reads are
    the only ones. checksum() sums the absolute values of this worker's parameters (a list: one per
    in-process replica; None: nothing to compare), so the driver can check that every replica ended with
    the same model; extra() adds backend figures to the result.

    With a saver and cfg.checkpoint, the loop checkpoints at every epoch's end (and every
    cfg.checkpoint_every_s inside long epochs) through ray.train.report, and a restarted worker group
    resumes from ray.train.get_checkpoint(): same position in the data, same sums, the steady windows
    timed so far. An epoch's metrics go to the driver only once its checkpoint is taken (and again from
    the checkpoint after a restart: the driver keeps each epoch's first arrival), so MLflow holds each
    epoch once.
    """
    import logging

    import ray
    import ray.train

    logging.getLogger("ray.train").setLevel(logging.WARNING)  # a line per report and checkpoint otherwise
    phases = phases or Phases(cfg.trial_start)
    chrono = Chrono(cfg.trial_start, cfg.warmup_steps)
    reporter = Reporter(cfg, rank)
    saving = saver is not None and cfg.checkpoint
    pos = {"epoch": 0, "step": 0, "sums": 0.0, "epoch_s": 0.0, "done": 0, "reads": 0, "host_syncs": 0,
           "epochs": [], "checkpoint_s": 0.0, "checkpoints": 0, "interval": None, "saved_done": 0}
    if rank == 0:
        cfg.sink.attempt.remote(time.time())
    restored = ray.train.get_checkpoint() if saving else None
    resumed_from = None  # the step this attempt started from, when it restored a checkpoint
    if restored is not None:
        with restored.as_directory() as d:
            meta = json.loads((Path(d) / META).read_text())
            saver.load(d, meta["done"])
        pos.update(meta["pos"])
        resumed_from = pos["done"]
        chrono.carried = meta["timing"]
        for fields in pos["epochs"]:  # lost if the failure came between the checkpoint and its send
            reporter.epoch(fields)

    handoff = Handoff() if saving else None

    def save_checkpoint(epoch_done: int, step: int, sums, epoch_s: float, after=()) -> None:
        t0 = time.perf_counter()
        timing = chrono.state()
        timing.setdefault("phases", phases.summary(timing["startup_s"]))
        state = {**pos, "epoch": epoch_done, "step": step, "sums": sums, "epoch_s": epoch_s, "done": done,
                 "reads": reads, "host_syncs": host_syncs, "saved_done": done,
                 "checkpoints": pos["checkpoints"] + 1}  # a restart from it counts it
        with tempfile.TemporaryDirectory(prefix="raylab-checkpoint-") as d:
            saver.save(d, rank)
            if rank == 0:
                (Path(d) / META).write_text(json.dumps(builtins_only({"done": done, "pos": state, "timing": timing})))
                if saver.before_report is not None:
                    saver.before_report()
            ray.train.report({"epoch": epoch_done, "step": done},
                             checkpoint=ray.train.Checkpoint.from_directory(d) if rank == 0 else None)
        pos["checkpoint_s"] += time.perf_counter() - t0
        pos["checkpoints"] += 1
        pos["saved_done"] = done
        if rank == 0:
            taken = time.time()
            handoff.after_report(lambda: cfg.sink.checkpointed.remote(taken), *after)

    def calibrate() -> None:
        """Checkpoints inside an epoch every checkpoint_every_s: rank 0 turns that into steps once (every rank
        must checkpoint at the same window), from its first steady window."""
        if rank == 0:
            secs, k = chrono.windows[-1]
            interval = max(cfg.window, int(cfg.checkpoint_every_s * k / max(secs, 1e-9)) // cfg.window * cfg.window)
            ray.get(cfg.sink.set_interval.remote(interval), timeout=60)
        deadline = time.monotonic() + 300
        while pos["interval"] is None:
            pos["interval"] = ray.get(cfg.sink.interval.remote(), timeout=60)
            if pos["interval"] is None:
                if time.monotonic() > deadline:
                    raise TimeoutError("rank 0 did not set the checkpoint interval within 300 s")
                time.sleep(0.05)

    done, reads, host_syncs, own = pos["done"], pos["reads"], pos["host_syncs"], 0
    for epoch in range(pos["epoch"] + 1, cfg.epochs + 1):
        resuming = epoch == pos["epoch"] + 1 and pos["step"] > 0  # a checkpoint inside this epoch
        i = pos["step"] if resuming else 0
        sums = np.asarray(pos["sums"], dtype=np.float64) if resuming else 0.0
        t_epoch = time.perf_counter() - (pos["epoch_s"] if resuming else 0.0)
        before = syncs() if syncs else 0
        for k in windows(steps_per_epoch - i, cfg.window, chrono.warmup, own):
            chrono.start()
            part = np.asarray(read(train(k)), dtype=np.float64)
            chrono.stop(k)
            reads, done, own, i = reads + 1, done + k, own + k, i + k
            sums = sums + part
            reporter.progress(epoch, i, steps_per_epoch, float(part[0]) / k, k)
            if saving and cfg.checkpoint_every_s > 0 and i < steps_per_epoch:
                if pos["interval"] is None and own >= chrono.warmup + cfg.window:
                    calibrate()
                if pos["interval"] is not None and done - pos["saved_done"] >= pos["interval"]:
                    host_syncs += (syncs() - before) if syncs else 0
                    before = syncs() if syncs else 0
                    save_checkpoint(epoch - 1, i, sums, time.perf_counter() - t_epoch)
        host_syncs += (syncs() - before) if syncs else 0
        fields = {"epoch": epoch, "epoch_time_s": time.perf_counter() - t_epoch, **results(sums, steps_per_epoch, "train_")}
        if rank == 0:
            fields.update(evaluate(), elapsed_s=chrono.elapsed())
        if saving:  # the epoch reaches the driver once its checkpoint is safe
            pos["epochs"].append(builtins_only(fields))
            save_checkpoint(epoch, 0, 0.0, 0.0, after=(lambda fields=fields: reporter.epoch(fields),))
        else:
            reporter.epoch(fields)
    if handoff is not None:
        handoff.finish()

    host_syncs = host_syncs if syncs else reads
    where = ray.get_runtime_context()
    # Waited for: the driver reads every rank's checksum and node after fit().
    ray.get(cfg.sink.checksum.remote(rank, checksum(), where.get_node_id()))
    if rank == 0:
        held = {k: v for k, v in sorted(where.get_assigned_resources().items()) if not k.startswith("node:")}
        timing = chrono.summary(cfg.global_batch)
        startup = chrono.carried["phases"] if chrono.carried else phases.summary(timing["startup_s"])
        saved = {"checkpoints": pos["checkpoints"], "checkpoint_s": pos["checkpoint_s"]} if saving else {}
        if resumed_from is not None:
            saved["resumed_from_step"] = resumed_from
        reporter.result({**timing, **startup, **(extra() if extra else {}), **saved,
                         "steps_per_epoch": steps_per_epoch, "host_syncs": host_syncs,
                         "steps_per_host_sync": done / max(host_syncs, 1),
                         "actual": {"actual_strategy": cfg.strategy, **actual, **host_facts(),
                                    "step_timing": "per step (synced)" if cfg.window == 1 else
                                    f"window mean ({cfg.window} steps per host read)",
                                    "checkpointing": ("epoch ends" + (f" and every {cfg.checkpoint_every_s:g} s"
                                                      if cfg.checkpoint_every_s > 0 else "")) if saving else
                                    ("off (--max-failures 0)" if saver is not None else "not supported by this trial"),
                                    "ray_resources": ",".join(f"{k}={v:g}" for k, v in held.items())}})
