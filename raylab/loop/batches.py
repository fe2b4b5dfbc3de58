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
    """A streamed shard as a source. `deliveries.start(total)` (raylab/data/shard.py Deliveries) starts this worker's
    delivery at once, before the model is built: passes over its split follow each other without a pause and are
    cut into batches ahead of the step (raylab/data/deliver.py); an epoch is steps_per_epoch of them, as for every
    worker of the trial (every split has as many rows).

    A stream cannot seek: restart(done) reads past the batches the restored epoch had already trained on
    (`skipped`: how many); the order is Ray Data's, not a replay of the lost one.
    wait_s: seconds next() waited for batches (conversion for the device included).
    """

    def __init__(self, deliveries, steps_per_epoch: int, convert: Callable[[Any], Any] = lambda b: b):
        self.steps, self._convert = steps_per_epoch, convert
        self.wait_s, self.skipped, self.first_wait_s = 0.0, 0, None
        self.delivery = deliveries.start(steps_per_epoch * deliveries.epochs)

    def next(self) -> Any:
        t0 = time.perf_counter()
        batch = self._convert(self.delivery.next())
        waited = time.perf_counter() - t0
        if self.first_wait_s is None:
            self.first_wait_s = waited
        self.wait_s += waited
        return batch

    def restart(self, done: int) -> None:
        self.delivery.total += done % self.steps
        for _ in range(done % self.steps):
            self.delivery.next()
            self.skipped += 1

    def close(self) -> None:
        self.delivery.close()

    def figures(self) -> dict:
        d = self.delivery
        return {
            "stream_skipped_batches": self.skipped,
            "stream_passes": d.passes,
            "stream_read_early": int(d.early),
            **({"stream_first_chunk_s": d.first_chunk_s} if d.first_chunk_s is not None else {}),
            **({"stream_first_wait_s": self.first_wait_s} if self.first_wait_s is not None else {}),
        }
