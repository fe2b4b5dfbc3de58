"""Where a worker's training batches come from: the loop's one seam for input.

A backend's train(k) takes each step's batch from a BatchSource. Today's sources hold the worker's
in-memory shard (raylab/frameworks/torch/worker.py ShardBatches, the TF and XLA loaders); a streamed dataset
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

    def figures(self) -> dict:
        """What the trial records of its input, beside input_wait_s (a stream: batches skipped after a restart)."""
        return {}


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


class StreamBatches(BatchSource):
    """A streamed shard as a source: epoch() starts one pass over this worker's split (Ray Data re-runs the pipeline
    each epoch); every steps_per_epoch batches the next pass starts, as every worker of the trial does, and a pass
    that ends first (an epoch longer than one pass) is followed by the next (every split has as many batches).

    A stream cannot seek: restart(done) starts a new pass and reads past the batches the restored epoch had
    already trained on (`skipped`: how many); the order inside a pass is Ray Data's, not a replay of the lost one.
    wait_s: seconds next() waited for batches (after Ray Data's prefetching; conversion included).
    """

    def __init__(self, epoch: Callable[[], Any], steps_per_epoch: int, convert: Callable[[Any], Any] = lambda b: b):
        self._epoch, self.steps, self._convert = epoch, steps_per_epoch, convert
        self.wait_s, self.skipped, self.passes = 0.0, 0, 0
        self.iterator, self.pos = None, 0

    def _new_pass(self) -> None:
        self.iterator, self.pos = iter(self._epoch()), 0
        self.passes += 1

    def _take(self):
        if self.iterator is None or self.pos == self.steps:
            self._new_pass()
        try:
            batch = next(self.iterator)
        except StopIteration:  # an epoch longer than one pass (--steps-per-epoch): the data repeats, as in memory
            self.iterator = iter(self._epoch())
            self.passes += 1
            batch = next(self.iterator, None)
            if batch is None:
                raise RuntimeError("this worker's stream split is empty: the dataset has fewer items than the "
                                   "trial's workers x batch") from None
        self.pos += 1
        return batch

    def next(self) -> Any:
        t0 = time.perf_counter()
        batch = self._convert(self._take())
        self.wait_s += time.perf_counter() - t0
        return batch

    def restart(self, done: int) -> None:
        self._new_pass()
        for _ in range(done % self.steps):
            self._take()
            self.skipped += 1

    def figures(self) -> dict:
        return {"stream_skipped_batches": self.skipped, "stream_passes": self.passes}
