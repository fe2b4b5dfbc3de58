"""The training loop every backend shares: windows of steps, an epoch's end, the final report.

A backend hands run_epochs one Training: train(k) runs k steps, taking their batches from its
BatchSource, and returns their stats summed and left where they were computed; read(sums) is the
window's one host copy. The loop cuts each epoch into windows of cfg.window steps, times them with
one Chrono, reports the same names for every framework and checkpoints through its Checkpointer.
Only rank 0 reports: one child run per trial, never one per rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from raylab.loop.batches import BatchSource
from raylab.loop.beside import Beside
from raylab.loop.checkpoint import Checkpointer, Saver
from raylab.loop.memory import device_peak_mb, peak_rss_mb
from raylab.loop.report import HostReads, Reporter, builtins_only
from raylab.loop.state import windows
from raylab.loop.step import StepContext
from raylab.loop.work import work
from raylab.loop.worker_config import WorkerConfig, host_facts
from raylab.timing import Chrono, Phases


@dataclass
class Training:
    """What a backend hands the loop.

    train(k) runs k synchronous training steps and returns their stats summed, unread: [sum of the steps'
    mean losses, metric numerator, denominator, ...] of this worker's batches; read(sums) copies them to the
    host, the only wait on the device between steps. results(sums, steps, "train_") names an epoch's figures;
    evaluate() returns val_loss and val_<metric> on the test split (called on rank 0 only). checksum() sums
    |parameters| of this worker (a list: one per in-process replica; None: nothing to compare), so the driver
    can check that every replica ended with the same model. syncs(), where given, counts every
    device-to-host read of the process (the framework's own counter). extra() adds backend figures to the
    result; phases holds the start-up breakdown the backend marked.

    Given `data` (the worker's input: raylab/data/shard.py's MemoryShard or StreamShard), evaluate is the
    framework's evaluator of (x, y) batches, and the loop writes once what every framework records of its input:
    evaluation over that data's test split, the input's facts among what ran, Ray Data's statistics with a streamed
    trial's result (`over_data`). Without it (the parameter-server chiefs), evaluate() is called as it is.
    """

    steps_per_epoch: int
    train: Callable[[int], Any]
    evaluate: Callable[[], dict]
    results: Callable[[Any, float, str], dict]
    actual: dict  # what ran, as the backend found it (strategy class, device, versions, threads, ...)
    checksum: Callable[[], float | list[float] | None]
    read: Callable[[Any], Any] = np.asarray
    batches: BatchSource | None = None  # where train(k) takes its batches (moved on after a restore)
    step: StepContext = field(default_factory=StepContext)  # the step's precision context and profiler
    saver: Saver | None = None  # checkpoints in the framework's format (None: this trial can't checkpoint)
    syncs: Callable[[], int] | None = None
    extra: Callable[[], dict] | None = None
    phases: Phases | None = None
    data: Any = None
    # flops(x, y): one training step's FLOPs on that batch of the data's prepared items, by the framework's own
    # counter (raylab/frameworks/*/flops.py); with `data`, rank 0 counts once, after training (`work`)
    flops: Callable[[Any, Any], int] | None = None
    # activations(x): {activation: calls} of one forward pass on prepared items (raylab/frameworks/*/layers.py), read
    # with flops (`work`) into the `activations` tag
    activations: Callable[[Any], dict] | None = None


def over_data(training: Training, rank: int) -> Training:
    """The Training as the loop runs it: with `data`, evaluation over its test split, its facts and its statistics."""
    if training.data is None:
        return training
    import dataclasses

    from raylab.data.shard import data_facts, evaluation, stream_stats

    data, counted = training.data, {}
    # In place: a backend may still add to its dict as it trains (jax's first losses, read at the first host copy)
    training.actual.update(data_facts(data))
    if training.flops is not None:
        training.actual["flops_count"] = lambda: counted.get("how", "not counted")
    if training.activations is not None:
        training.actual["activations"] = lambda: counted.get("activations", "not read")
    return dataclasses.replace(
        training,
        data=None,
        evaluate=evaluation(data, training.evaluate),
        flops=None,
        activations=None,
        extra=combined(
            stream_stats(data, rank), training.extra, work(training.flops, training.activations, data, rank, counted)
        ),
    )


def combined(*extras: Callable[[], dict] | None) -> Callable[[], dict] | None:
    """One Training.extra() of several (None where none is given)."""
    given = [e for e in extras if e is not None]
    return (lambda: {k: v for e in given for k, v in e().items()}) if given else None


def run_epochs(cfg: WorkerConfig, rank: int, training: Training) -> None:
    """Train cfg.epochs epochs on this worker and report them (rank 0).

    With a saver and cfg.checkpoint, the loop checkpoints at every epoch's end (and every
    cfg.checkpoint_every_s inside long epochs) through ray.train.report, and a restarted worker group
    resumes from ray.train.get_checkpoint(): same position in the data, same sums, the steady windows
    timed so far. An epoch's metrics go to the driver only once its checkpoint is taken (and again from
    the checkpoint after a restart: the driver keeps each epoch's first arrival), so MLflow holds each
    epoch once.
    """
    import logging

    logging.getLogger("ray.train").setLevel(logging.WARNING)  # a line per report and checkpoint otherwise
    Loop(cfg, rank, over_data(training, rank)).run()


class Loop:
    def __init__(self, cfg: WorkerConfig, rank: int, training: Training):
        self.cfg, self.rank, self.t = cfg, rank, training
        self.phases = training.phases or Phases(cfg.trial_start)
        self.chrono = Chrono(cfg.trial_start, cfg.warmup_steps)
        self.reporter = Reporter(cfg.sink, rank, cfg.epochs, cfg.global_batch)
        self.checkpointer = Checkpointer(cfg, rank, training.saver)
        self.train = training.train
        # --profile: rank 0 profiles its first steady window (raylab/loop/profile.py); the others never look.
        self.profiling = cfg.profile and rank == 0 and training.step.profile is not None
        self.own = 0  # steps this attempt trained (the warm-up counts from the attempt's start)
        self.window_waits: list[float] = []  # seconds each of this attempt's windows waited for input
        self.beside = Beside()  # its node read as the first steady window starts and as it reports

    def run(self) -> None:
        if self.rank == 0:
            self.cfg.sink.attempt.remote(time.time())
        self.state = self.checkpointer.restore(self.chrono, self.t.batches)
        self.host = HostReads(self.t.syncs, self.state.reads, self.state.host_syncs)
        for fields in self.state.epochs:  # lost if the failure came between the checkpoint and its send
            self.reporter.epoch(fields)
        for epoch in range(self.state.epoch + 1, self.cfg.epochs + 1):
            self.end_epoch(epoch, *self.epoch_windows(epoch))
            if self.timed_enough():
                break
        self.checkpointer.finish()
        self.report()

    def epoch_windows(self, epoch: int) -> tuple[Any, float]:
        """One epoch's windows (from a restored checkpoint's position inside it): (its sums, its seconds)."""
        state, steps, read = self.state, self.t.steps_per_epoch, self.t.read
        i, sums = state.step, state.epoch_sums()
        t_epoch = time.perf_counter() - (state.epoch_s if i else 0.0)
        self.host.begin()
        self.waited = self.input_wait()
        for k in windows(steps - i, self.cfg.window, self.chrono.warmup, self.own):
            profiler = self.profiler(k)
            if self.own >= self.chrono.warmup:
                self.beside.begin()  # once: what ran beside the steady windows (and evaluation, its own work)
            self.chrono.start()
            before = self.input_wait()
            try:
                part = np.asarray(read(self.train(k)), dtype=np.float64)
                self.chrono.stop(k)
            finally:
                if profiler is not None:
                    self.close_profiler(profiler)  # it stops and writes its files: outside the window's time
            if before is not None:
                self.window_waits.append(self.input_wait() - before)
            if profiler is not None:
                self.send_profile(profiler, (state.done + 1, state.done + k), before)
            self.host.read()
            state.done, self.own, i, sums = state.done + k, self.own + k, i + k, sums + part
            self.reporter.progress(epoch, i, steps, float(part[0]) / k, k, self.steady_left())
            if self.timed_enough():
                break  # --seconds: the epoch ends here, evaluated and reported as any epoch's end
            if self.checkpointer.due(state, self.own, self.chrono, i, steps):
                self.host.settle()
                self.checkpoint(epoch - 1, i, sums, time.perf_counter() - t_epoch)
        self.host.settle()
        self.waited = None if self.waited is None else self.input_wait() - self.waited
        self.epoch_steps = i
        return sums, time.perf_counter() - t_epoch

    def timed_enough(self) -> bool:
        """--seconds: this trial's steady steps have reached them (every attempt's; a trial's one process decides)."""
        return self.cfg.seconds is not None and self.chrono.steady_s() >= self.cfg.seconds

    def steady_left(self) -> float | None:
        """--seconds: the steady seconds still to time (None: the trial runs its epochs)."""
        return None if self.cfg.seconds is None else max(0.0, self.cfg.seconds - self.chrono.steady_s())

    def profiler(self, k: int):
        """The framework's profiler, started, around the first steady window of rank 0 (--profile); else None."""
        if not self.profiling or self.own < self.chrono.warmup:
            return None
        import contextlib
        import tempfile
        from pathlib import Path

        from raylab.loop.profile import Captured

        self.profiling = False  # one window per attempt
        stack = contextlib.ExitStack()
        stack.logdir, stack.found = Path(tempfile.mkdtemp(prefix="raylab-profile-")), Captured("")
        stack.enter_context(self.t.step.profile(stack.logdir, stack.found))
        return stack

    @staticmethod
    def close_profiler(profiler) -> None:
        """Stops the profiler; what it could not write or read becomes a note of the summary, never the trial's
        failure."""
        try:
            profiler.close()
        except Exception as e:  # noqa: BLE001 - a profile is an extra: training goes on without it
            profiler.found.notes.append(f"(the profiler failed to finish: {type(e).__name__}: {str(e)[:200]})")

    def send_profile(self, profiler, steps: tuple[int, int], wait_before: float | None) -> None:
        """The window's trace files and its summary, to the driver (it logs them as the run's artifacts)."""
        import shutil

        from raylab.loop import profile

        seconds = self.chrono.windows[-1][0]
        waited = None if wait_before is None else self.input_wait() - wait_before
        text = profile.summary(self.cfg.trial, profiler.found, steps, seconds, waited)
        (profiler.logdir / profile.SUMMARY).write_text(text)
        self.cfg.sink.profile.remote(
            profile.files(profiler.logdir), f"steps {steps[0]}-{steps[1]} of rank 0, {profiler.found.tool}"
        )
        shutil.rmtree(profiler.logdir, ignore_errors=True)

    def input_wait(self) -> float | None:
        """Seconds this attempt's steps have waited for their batches (None: not measurable apart, see BatchSource)."""
        return self.t.batches.wait_s if self.t.batches is not None else None

    def end_epoch(self, epoch: int, sums, seconds: float) -> None:
        """The epoch's figures (and evaluation, on rank 0), sent once its checkpoint is safe."""
        fields = {
            "epoch": epoch,
            "epoch_time_s": seconds,
            **self.t.results(sums, self.epoch_steps, "train_"),
            **({"epoch_input_wait_s": self.waited} if self.waited is not None else {}),
        }
        if self.rank == 0 and self.cfg.probe:  # a --batch max probe: one evaluation batch must fit too (unreported)
            self.t.evaluate(self.cfg.batch_per_replica)
        elif self.rank == 0:
            fields.update(self.t.evaluate(), elapsed_s=self.chrono.elapsed())
        if not self.checkpointer.on:
            self.reporter.epoch(fields)
            return
        self.state.epochs.append(builtins_only(fields))
        self.checkpoint(epoch, 0, 0.0, 0.0, after=(lambda: self.reporter.epoch(fields),))

    def checkpoint(self, epochs_done: int, step: int, sums, epoch_s: float, after=()) -> None:
        state = self.state
        state.epoch, state.step, state.sums, state.epoch_s = epochs_done, step, sums, epoch_s
        state.reads, state.host_syncs = self.host.reads, self.host.counted
        self.checkpointer.save(state, self.chrono, self.phases, after)

    def report(self) -> None:
        """Every rank's checksum, node, peak RSS and what ran beside it; rank 0's result: timing, start-up, what ran."""
        import ray

        where = ray.get_runtime_context()
        # Waited for: the driver reads every rank's checksum, node and peak RSS after fit().
        ray.get(
            self.cfg.sink.checksum.remote(
                self.rank, self.t.checksum(), where.get_node_id(), peak_rss_mb(), self.beside.end()
            )
        )
        if self.rank != 0:
            return
        timing = self.chrono.summary(self.cfg.global_batch)
        carried = self.chrono.carried
        startup = carried["phases"] if carried else self.phases.summary(timing["startup_s"])
        device = device_peak_mb(self.cfg.framework)
        extra = self.t.extra() if self.t.extra else {}
        if "flops_per_sample" in extra and timing.get("samples_per_sec"):  # at the steady samples/s, every replica's
            extra["achieved_tflops"] = extra["flops_per_sample"] * timing["samples_per_sec"] / 1e12
        self.reporter.result(
            {
                **timing,
                **startup,
                **({"device_peak_mb": device} if device is not None else {}),
                **extra,
                **self.checkpointer.figures(self.state),
                **self.input_figures(),
                "steps_per_epoch": self.t.steps_per_epoch,
                "steps_trained": self.state.done,
                "host_syncs": self.host.total,
                "steps_per_host_sync": self.state.done / max(self.host.total, 1),
                "actual": self.actual(where),
            }
        )

    def input_figures(self) -> dict:
        """input_wait_s: seconds this attempt's steps waited for batches (the pipeline's start included), and
        input_wait_share: the share of the steady windows' time (those samples/s is measured on) spent waiting;
        a streamed source adds what it skipped after a restart."""
        waited = self.input_wait()
        if waited is None:
            return {}
        first = self.chrono.first_steady()
        steady = self.chrono.windows[first:] if first is not None else self.chrono.windows[-1:]
        waits = self.window_waits[first:] if first is not None else self.window_waits[-1:]
        trained = sum(seconds for seconds, _ in steady)
        return {
            "input_wait_s": waited,
            "input_wait_share": sum(waits) / trained if trained else 0.0,
            **self.t.batches.figures(),
        }

    def actual(self, where) -> dict:
        held = {k: v for k, v in sorted(where.get_assigned_resources().items()) if not k.startswith("node:")}
        window = self.cfg.window
        known = {k: (v() if callable(v) else v) for k, v in self.t.actual.items()}  # streamed: read off evaluations
        return {
            "actual_strategy": self.cfg.short,
            **known,
            **host_facts(),
            "step_timing": "per step (synced)" if window == 1 else f"window mean ({window} steps per host read)",
            # where the input's wait is timed: apart from the steps, or not at all (read inside the step's graph)
            "input_timing": "per batch" if self.input_wait() is not None else "in the framework's graph",
            "checkpointing": self.checkpointer.describe(),
            "ray_resources": ",".join(f"{k}={v:g}" for k, v in held.items()),
        }
