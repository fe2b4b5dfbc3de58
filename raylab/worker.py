"""What every worker shares, whatever the framework: its config, the epoch loop, reporting.

Backends supply train(k), which runs k training steps and leaves their summed loss and metric
statistics on the device, and read(), the one host copy of those sums; this module cuts each
epoch into windows of `window` steps, reads once per window, times windows with the same Chrono
and reports the same names. Only rank 0 reports: one child run per trial, never one per rank.
"""

from __future__ import annotations

import numbers
import os
import platform
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from raylab.task import Task
from raylab.timing import Chrono, Phases

PROGRESS_EVERY_S = 2.0  # how often rank 0 sends a progress line to the driver


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
        self._last, self._steps = None, 0

    def progress(self, epoch: int, step: int, steps: int, loss: float, window: int = 1) -> None:
        """Called at each window's end; throttled; samples/s is averaged over the steps since the last line."""
        now = time.monotonic()
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
    """
    phases = phases or Phases(cfg.trial_start)
    chrono = Chrono(cfg.trial_start, cfg.warmup_steps)
    reporter = Reporter(cfg, rank)
    reads = host_syncs = done = 0
    for epoch in range(1, cfg.epochs + 1):
        t_epoch, sums, i = time.perf_counter(), 0.0, 0
        before = syncs() if syncs else 0
        for k in windows(steps_per_epoch, cfg.window, chrono.warmup, done):
            chrono.start()
            part = np.asarray(read(train(k)), dtype=np.float64)
            chrono.stop(k)
            reads, done, i = reads + 1, done + k, i + k
            sums = sums + part
            reporter.progress(epoch, i, steps_per_epoch, float(part[0]) / k, k)
        host_syncs += (syncs() - before) if syncs else 0
        fields = {"epoch": epoch, "epoch_time_s": time.perf_counter() - t_epoch, **results(sums, steps_per_epoch, "train_")}
        if rank == 0:
            fields.update(evaluate(), elapsed_s=chrono.elapsed())
        reporter.epoch(fields)
    import ray

    host_syncs = host_syncs if syncs else reads
    where = ray.get_runtime_context()
    # Waited for: the driver reads every rank's checksum and node after fit().
    ray.get(cfg.sink.checksum.remote(rank, checksum(), where.get_node_id()))
    if rank == 0:
        held = {k: v for k, v in sorted(where.get_assigned_resources().items()) if not k.startswith("node:")}
        timing = chrono.summary(cfg.global_batch)
        reporter.result({**timing, **phases.summary(timing["startup_s"]), **(extra() if extra else {}),
                         "steps_per_epoch": steps_per_epoch, "host_syncs": host_syncs,
                         "steps_per_host_sync": done / max(host_syncs, 1),
                         "actual": {"actual_strategy": cfg.strategy, **actual, **host_facts(),
                                    "step_timing": "per step (synced)" if cfg.window == 1 else
                                    f"window mean ({cfg.window} steps per host read)",
                                    "ray_resources": ",".join(f"{k}={v:g}" for k, v in held.items())}})
