"""Where a worker's training batches come from: the loop's one seam for input.

A backend's train(k) takes each step's batch from a BatchSource. Today's sources hold the worker's
in-memory shard (raylab/backends/torch.py ShardBatches, the TF and XLA loaders); a streamed dataset
comes in as another source. The loop moves a source to a checkpoint's position after a restart and
records how long the steps waited on it.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class BatchSource:
    """next() -> the next step's batch, in the form the backend's step takes it; restart(done) starts the order
    over just after the trial's first `done` batches (a restored checkpoint's position), so a restarted trial
    trains on what an uninterrupted one would have.

    wait_s: seconds next() spent producing batches so far; None where the input runs inside the framework's
    own graph (a tf.data pipeline read inside the step's tf.function), where the loop cannot time it apart.
    """

    wait_s: float | None = 0.0

    def next(self) -> Any:
        raise NotImplementedError

    def restart(self, done: int) -> None:
        raise NotImplementedError


class Batches(BatchSource):
    """A source from a function that makes an iterator of batches starting after `done` (timed per batch)."""

    def __init__(self, start: Callable[[int], Any], timed: bool = True):
        self._start, self._timed = start, timed
        self.wait_s = 0.0 if timed else None
        self.iterator = start(0)

    def next(self) -> Any:
        if not self._timed:
            return next(self.iterator)
        t0 = time.perf_counter()
        batch = next(self.iterator)
        self.wait_s += time.perf_counter() - t0
        return batch

    def restart(self, done: int) -> None:
        self.iterator = self._start(done)
