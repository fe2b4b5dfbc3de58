"""What rank 0 tells the driver (progress, epochs, the result) and how host reads are counted."""

from __future__ import annotations

import numbers
import time
from typing import Callable

PROGRESS_EVERY_S = 2.0  # how often rank 0 sends a progress line to the driver
ALIVE_EVERY_S = 0.5  # how often rank 0 tells the sink it is still training (a failure's time, to this precision)


class Reporter:
    """Rank 0's line to the driver: progress (throttled), per-epoch metrics, the final result.

    Other ranks hold one too, and it sends nothing: only rank 0 reports, one child run per trial.
    """

    def __init__(self, sink, rank: int, epochs: int, global_batch: int):
        self.sink = sink if rank == 0 else None
        self.epochs, self.global_batch = epochs, global_batch
        self._last, self._steps, self._alive = None, 0, 0.0

    def progress(
        self, epoch: int, step: int, steps: int, loss: float, window: int = 1, steady_left: float | None = None
    ) -> None:
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
            rate = self._steps * self.global_batch / (now - self._last)
            self.sink.progress.remote(
                {
                    "epoch": epoch,
                    "epochs": self.epochs,
                    "step": step,
                    "steps": steps,
                    "samples_per_sec": rate,
                    "loss": loss,
                    **({"steady_left_s": steady_left} if steady_left is not None else {}),
                }
            )
            self._last, self._steps = now, 0

    def epoch(self, fields: dict) -> None:
        if self.sink is not None:
            self.sink.epoch.remote(fields)

    def result(self, fields: dict) -> None:
        if self.sink is not None:
            import ray

            ray.get(self.sink.result.remote(builtins_only(fields)))  # wait: the driver reads it right after fit()


class HostReads:
    """Device-to-host reads in training windows: the framework's own counter where it has one (`syncs()`,
    every read of the process so far), else the loop's one read per window. Evaluation's reads don't count:
    settle() is called before it, and begin() after it."""

    def __init__(self, syncs: Callable[[], int] | None, reads: int = 0, counted: int = 0):
        self.syncs, self.reads, self.counted = syncs, reads, counted
        self._mark = 0

    def begin(self) -> None:
        """At an epoch's start: the framework's reads from here on are training reads."""
        self._mark = self.syncs() if self.syncs else 0

    def read(self) -> None:
        """The loop's read at a window's end."""
        self.reads += 1

    def settle(self) -> None:
        """Count the framework's reads since begin() or the last settle() (at epoch ends and checkpoints)."""
        if self.syncs:
            now = self.syncs()
            self.counted, self._mark = self.counted + now - self._mark, now

    @property
    def total(self) -> int:
        return self.counted if self.syncs else self.reads


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
