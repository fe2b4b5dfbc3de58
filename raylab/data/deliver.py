"""Delivering a streamed split to the step: large chunks from Ray Data, cut into training batches in the worker.

Ray Data costs a few milliseconds per batch it hands over, whatever the batch holds, and each pass over a split takes a
second or more to start. A worker therefore takes `chunk_rows(batch)` rows (raylab/data/chunks.py) at a time from Ray
Data, as Arrow tables, and does the per-batch work itself:

- a reader thread takes the chunks, turns each column into one contiguous numpy array (`dense`: list,
  fixed-size-list and tensor columns through Arrow, never row by row in Python) and keeps up to
  READ_AHEAD_BYTES of them; when a pass ends it starts the next one at once, so the pass's start-up runs
  while the step trains on what was read ahead (no pause between epochs);
- a cutter thread mixes the rows across a shuffle window (raylab/data/shuffle.py: the worker's whole split where
  it fits in WINDOW_BYTES, a new seeded order every pass), prepares them a chunk's worth at a time (the recipe's
  preprocessing, in one call), cuts them into batches (whole batches only; a pass's last partial batch is
  dropped) and converts each (tensors for torch) for the step, a few batches ahead.

The reader starts as the worker's training function starts (raylab/data/shard.py read_early), so the first pass
starts while the framework finishes importing and the model builds; the cutter when the trial's batch source is
made. Both stop after the batches the trial will take.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable

import numpy as np

from raylab.data.chunks import chunk_rows, join, nbytes, numpy_block, rows, take
from raylab.data.shuffle import SortedLook, Window, describe, window_rows

PREFETCH_BATCHES = 2  # Ray Data batches fetched ahead of the step (ray's default is 1)

READ_AHEAD_BYTES = 256 << 20  # dense chunks a worker reads ahead of the cutter (at least two chunks)
READY_BATCHES = 4  # prepared batches waiting for the step
# Set while rank 0 reads the test split from Ray Data: the reader starts no new pass meanwhile. (On a 2-CPU machine,
# one data CPU: a train pass started beside the epoch-end test read made that read take 15.6 s instead of 0.2 s.)
TEST_READ, TEST_READ_DONE = threading.Event(), threading.Event()


# -- the threads --------------------------------------------------------------------------------------------
class _End:
    """A pass ended after `rows` rows (the cutter drops its partial batch)."""

    def __init__(self, rows: int):
        self.rows = rows


class Reader:
    """The reader thread: whole passes of dense chunks, one pass after another, READ_AHEAD_BYTES at most held.
    It can start before anything else of the trial is known (raylab/data/shard.py read_early); after each pass it
    asks `more(rows of each pass so far)` (set by the Delivery that takes its chunks; it waits until one does)
    whether the trial needs another."""

    def __init__(self, start_pass: Callable[[], Iterable], names: tuple[str, ...], read_ahead: int = READ_AHEAD_BYTES):
        import time

        self._start_pass, self.names, self._limit = start_pass, names, read_ahead
        self._held, self._cond, self._chunks = 0, threading.Condition(), []
        self.more: Callable[[list[int]], bool] | None = None
        self.stop = threading.Event()
        self.passes, self.pass_rows, self.first_chunk_s = 0, [], None
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._guard, name="raylab-stream-read", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.stop.set()
        with self._cond:
            self._cond.notify_all()

    def _guard(self) -> None:
        try:
            self._read()
        except BaseException as e:  # noqa: BLE001 - handed to the cutter, then the step, which raises it
            self._hold(e, 0, force=True)

    def _read(self) -> None:
        import time

        while not self.stop.is_set():
            while TEST_READ.is_set() and not self.stop.is_set():  # two Ray Data executions would share its CPUs
                TEST_READ_DONE.wait(0.2)
            self.passes += 1
            rows_in_pass = 0
            for block in self._start_pass():
                chunk = numpy_block(block, self.names)
                if self.first_chunk_s is None:
                    self.first_chunk_s = time.perf_counter() - self._t0
                rows_in_pass += rows(chunk)
                if not self._hold(chunk, nbytes(chunk)):
                    return
            self.pass_rows.append(rows_in_pass)
            if not self._hold(_End(rows_in_pass), 0):
                return
            with self._cond:
                while self.more is None and not self.stop.is_set():
                    self._cond.wait(0.5)
            if self.stop.is_set() or not self.more(self.pass_rows):
                return

    def _hold(self, item, size: int, force: bool = False) -> bool:
        with self._cond:
            while (
                not force
                and self._chunks
                and self._held + size > self._limit
                and len(self._chunks) >= 2
                and not self.stop.is_set()
            ):
                self._cond.wait(0.5)
            if self.stop.is_set() and not force:
                return False
            self._chunks.append((item, size))
            self._held += size
            self._cond.notify_all()
        return True

    def take(self):
        """The next chunk, pass end or error; None once stopped."""
        with self._cond:
            while not self._chunks:
                if self.stop.is_set():
                    return None
                self._cond.wait(0.5)
            item, size = self._chunks.pop(0)
            self._held -= size
            self._cond.notify_all()
        return item


class Delivery:
    """Batches of one worker's streamed split, made ahead of the step (see the module's docstring).

    reader: a Reader of the split's passes (started already, or made here from start_pass and names);
    prepare(chunk) -> the prepared (x, y) of a dense numpy chunk (mixed already); cut(xy, lo, hi) -> one
    converted batch of it; total: the batches to make (then the threads stop). split_rows: the rows of the
    worker's split (None: not known; the window is then as large as WINDOW_BYTES allows); order: how the source
    orders its files or blocks (recorded with the window); look: (target column, notify(line)) to say once when the
    split's first chunks look sorted by that target and the window cannot hold the split (rank 0 only)."""

    def __init__(
        self,
        reader: Reader,
        batch: int,
        seed: int,
        prepare: Callable[[dict], Any],
        cut: Callable[[Any, int, int], Any],
        total: int,
        split_rows: int | None = None,
        order: str = "the source's order",
        look: tuple[str, Callable[[str], Any]] | None = None,
    ):
        self.reader, self.batch, self.seed, self.total = reader, batch, seed, total
        self._prepare, self._cut = prepare, cut
        self.split_rows, self.order, self.made = split_rows, order, 0
        self.window: Window | None = None  # made at the first chunk, sized from its rows' bytes
        self._carry: dict | None = None  # rows short of a whole batch, joined to the next ones
        self._look, self._sorted = look, SortedLook() if look else None
        self.early = False  # whether the reader started as the training function did (read_early)
        self._ready: queue.Queue = queue.Queue(maxsize=READY_BATCHES)
        self._stop = threading.Event()
        with reader._cond:
            reader.more = self._more
            reader._cond.notify_all()
        self._thread = threading.Thread(target=self._guard, name="raylab-stream-cut", daemon=True)
        self._thread.start()

    @property
    def passes(self) -> int:
        return self.reader.passes

    @property
    def first_chunk_s(self) -> float | None:
        return self.reader.first_chunk_s

    def shuffle(self) -> str:
        """The shuffle this worker's passes got (the `shuffle` param): "global", or the window's rows."""
        rows = max(self.reader.pass_rows, default=self.split_rows)
        return describe(self.window.capacity if self.window else None, rows, self.order)

    def _more(self, pass_rows: list[int]) -> bool:
        return sum(r // self.batch for r in pass_rows) < self.total and pass_rows[-1] >= self.batch

    def next(self):
        item = self._ready.get()
        if isinstance(item, BaseException):
            self.close()
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self.reader.close()
        try:  # a cutter waiting to hand over a batch
            while True:
                self._ready.get_nowait()
        except queue.Empty:
            pass

    def _guard(self) -> None:
        try:
            self._cut_all()
        except BaseException as e:  # noqa: BLE001 - handed to the step, which raises it
            self.reader.close()
            self._put(e, force=True)

    def _put(self, item, force: bool = False) -> bool:
        while force or not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.5)
                return True
            except queue.Full:
                if self._stop.is_set():
                    return False
        return False

    # chunks mixed in the window, prepared and cut into whole batches
    def _cut_all(self) -> None:
        passes = 0
        while self.made < self.total:
            item = self.reader.take()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _End):  # the window's rest goes out; the pass's partial last batch is dropped
                if item.rows < self.batch:
                    raise RuntimeError(
                        "this worker's stream split is empty: the dataset has fewer items than the "
                        "trial's workers x batch"
                    )
                pieces = self.window.drain(chunk_rows(self.batch)) if self.window else ()
            else:
                pieces = self._window(item, passes).add(item)
            for piece in pieces:
                if not self._batches(piece):
                    return
            if isinstance(item, _End):
                passes, self._carry = passes + 1, None
                if self.window:
                    self.window.start(np.random.default_rng((self.seed, passes)))

    def _window(self, chunk: dict, passes: int) -> Window:
        """The shuffle window, made at the first chunk (its rows' bytes size it); the chunk looked at first."""
        if self.window is None:
            n = rows(chunk)
            self.window = Window(window_rows(self.split_rows, nbytes(chunk) / max(n, 1), chunk_rows(self.batch)))
            self.window.start(np.random.default_rng((self.seed, passes)))
        if self._sorted is not None and passes == 0 and self._sorted.verdict is None:
            self._look_at(chunk)
        return self.window

    def _look_at(self, chunk: dict) -> None:
        target, notify = self._look
        if self._sorted.add(chunk[target]) and self.window.capacity < (self.split_rows or 0):
            notify(
                f"the streamed train split looks sorted by {target!r}: its first {self._sorted.rows:,} rows "
                f"hold each class in one run, and the shuffle window holds {self.window.capacity:,} of a worker's "
                f"{self.split_rows:,} rows, so batches mix few classes. Shuffle the rows once when writing the "
                "files (pandas: df.sample(frac=1, random_state=0)), or write many smaller files: their order is "
                "shuffled every pass."
            )

    def _batches(self, chunk: dict) -> bool:
        """Cuts mixed rows into whole batches (the rest carried to the next rows), prepared and converted, and hands
        them to the step; False once stopped or every batch was made."""
        if self._carry is not None:
            chunk = join(self._carry, chunk)
        n = rows(chunk)
        whole = n - n % self.batch
        self._carry = take(chunk, slice(whole, n)) if whole < n else None
        if whole == 0:
            return True
        prepared = self._prepare(take(chunk, slice(0, whole)))
        for lo in range(0, whole, self.batch):
            if self.made == self.total or not self._put(self._cut(prepared, lo, lo + self.batch)):
                return False
            self.made += 1
        return True
