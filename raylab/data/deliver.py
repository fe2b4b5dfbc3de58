"""Delivering a streamed split to the step: large chunks from Ray Data, cut into training batches in the worker.

Ray Data costs a few milliseconds per batch it hands over, whatever the batch holds, and each pass over a
split takes a second or more to start. A worker therefore takes `chunk_rows(batch)` rows at a time from
Ray Data, as Arrow tables, and does the per-batch work itself:

- a reader thread takes the chunks, turns each column into one contiguous numpy array (`dense`: list,
  fixed-size-list and tensor columns through Arrow, never row by row in Python) and keeps up to
  READ_AHEAD_BYTES of them; when a pass ends it starts the next one at once, so the pass's start-up runs
  while the step trains on what was read ahead (no pause between epochs);
- a cutter thread shuffles each chunk's rows (seeded per pass), prepares the chunk (the recipe's
  preprocessing, in one call), cuts it into batches (whole batches only; a pass's last partial batch is
  dropped) and converts each (tensors for torch) for the step, a few batches ahead.

Both start when the trial's batch source is made, before the model is built, so the first pass starts while
the model builds. They stop after the batches the trial will take.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable

import numpy as np

from raylab.errors import UserError

READ_AHEAD_BYTES = 256 << 20  # dense chunks a worker reads ahead of the cutter (at least two chunks)
READY_BATCHES = 4  # prepared batches waiting for the step
MIN_CHUNK_ROWS = 2048


def chunk_rows(batch: int) -> int:
    """Rows a worker takes from Ray Data at a time: 8 batches, and at least MIN_CHUNK_ROWS."""
    return max(8 * batch, MIN_CHUNK_ROWS)


# -- Arrow columns as numpy arrays -------------------------------------------------------------------------
def dense(table, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The named columns of an Arrow table, each one numpy array with a row per table row (a list column of
    20 floats per row: [rows, 20]). A UserError names a column whose rows differ in shape or that has nulls."""
    out = {}
    for name in names:
        if name not in table.column_names:
            raise UserError(f"the stream has no column {name!r} (it has {', '.join(table.column_names)}); "
                            "name the stream's inputs= and targets= after its columns.")
        out[name] = column_array(table.column(name), name)
    return out


def column_array(column, name: str) -> np.ndarray:
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    parts = [_array(c, name) for c in chunks if len(c)]
    if not parts:
        return _array(chunks[0], name) if chunks else np.empty((0,))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _array(arr, name: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if isinstance(t, pa.ExtensionType):  # Ray Data's tensor columns (what `raylab data export` writes)
        a = arr.to_numpy()
        return _stacked(a, name) if a.dtype == object else a
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if arr.null_count:
            raise UserError(f"column {name!r} has {arr.null_count} missing rows; fill or drop them before training.")
        n = len(arr)
        if pa.types.is_fixed_size_list(t):
            width = t.list_size
        else:
            lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            width = int(lengths[0]) if n else 0
            bad = np.flatnonzero(lengths != width)
            if len(bad):
                raise UserError(f"column {name!r}: rows hold lists of different lengths ({width} in a row, "
                                f"{int(lengths[bad[0]])} in another); every row of a column needs the same shape "
                                "(pad or crop them when writing the files).")
        inner = _array(arr.flatten(), name)
        return inner.reshape(n, width, *inner.shape[1:])
    if arr.null_count:
        raise UserError(f"column {name!r} has {arr.null_count} missing values; fill or drop them before training.")
    return arr.to_numpy(zero_copy_only=False)


def _stacked(rows: np.ndarray, name: str) -> np.ndarray:
    shapes = {np.shape(r) for r in rows}
    if len(shapes) > 1:
        a, b = sorted(shapes)[:2]
        raise UserError(f"column {name!r}: rows hold arrays of different shapes ({a} and {b}); every row of a "
                        "column needs the same shape (resize or pad them when writing the data).")
    return np.stack(rows) if len(rows) else np.empty((0,))


def numpy_block(block, names: Iterable[str]) -> dict[str, np.ndarray]:
    """A chunk as Ray Data handed it (an Arrow table, or a dict of numpy arrays) as dense numpy columns."""
    if isinstance(block, dict):
        return {k: (_stacked(block[k], k) if block[k].dtype == object else block[k]) for k in names}
    return dense(block, names)


def rows(chunk: dict) -> int:
    return len(next(iter(chunk.values())))


def nbytes(chunk: dict) -> int:
    return sum(getattr(a, "nbytes", 0) for a in chunk.values())


def take(chunk: dict, idx) -> dict:
    return {k: a[idx] for k, a in chunk.items()}


def join(a: dict, b: dict) -> dict:
    return {k: np.concatenate([a[k], b[k]]) for k in a}


# -- the threads --------------------------------------------------------------------------------------------
class _End:
    """A pass ended (the cutter drops its partial batch)."""


class Delivery:
    """Batches of one worker's streamed split, made ahead of the step (see the module's docstring).

    start_pass() -> an iterable of chunks (Arrow tables or numpy dicts) of one pass; names: the columns read;
    make(chunk) -> the prepared, converted batches of a dense numpy chunk (shuffled already), given as
    make(chunk, lo, hi) per batch; batches_per_pass(rows) for planning; total: the batches to make (then stop)."""

    def __init__(self, start_pass: Callable[[], Iterable], names: tuple[str, ...], batch: int, seed: int,
                 prepare: Callable[[dict], Any], cut: Callable[[Any, int, int], Any], total: int,
                 read_ahead: int = READ_AHEAD_BYTES):
        self._start_pass, self.names, self.batch, self.seed = start_pass, names, batch, seed
        self._prepare, self._cut, self.total = prepare, cut, total
        self._limit, self._held, self._cond = read_ahead, 0, threading.Condition()
        self._chunks: list = []  # the reader's dense chunks (and pass ends), bounded by bytes
        self._ready: queue.Queue = queue.Queue(maxsize=READY_BATCHES)
        self._stop = threading.Event()
        self.passes = 0  # passes the reader started
        self.first_chunk_s: float | None = None
        self._threads = [threading.Thread(target=self._guard, args=(self._read,), name="raylab-stream-read", daemon=True),
                         threading.Thread(target=self._guard, args=(self._cut_all,), name="raylab-stream-cut", daemon=True)]
        import time

        self._t0 = time.perf_counter()
        for t in self._threads:
            t.start()

    def next(self):
        item = self._ready.get()
        if isinstance(item, BaseException):
            self._stop.set()
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        try:  # a cutter waiting to hand over a batch
            while True:
                self._ready.get_nowait()
        except queue.Empty:
            pass

    def _guard(self, body) -> None:
        try:
            body()
        except BaseException as e:  # noqa: BLE001 - handed to the step, which raises it
            self._stop.set()
            with self._cond:
                self._cond.notify_all()
            self._put(e)

    def _put(self, item) -> bool:
        while not self._stop.is_set() or isinstance(item, BaseException):
            try:
                self._ready.put(item, timeout=0.5)
                return True
            except queue.Full:
                if isinstance(item, BaseException) and self._stop.is_set():
                    return False
        return False

    # the reader: whole passes, one after another, until the batches the trial will take are covered
    def _read(self) -> None:
        import time

        planned = 0
        while planned < self.total and not self._stop.is_set():
            self.passes += 1
            rows_in_pass = 0
            for block in self._start_pass():
                chunk = numpy_block(block, self.names)
                if self.first_chunk_s is None:
                    self.first_chunk_s = time.perf_counter() - self._t0
                rows_in_pass += rows(chunk)
                if not self._hold(chunk, nbytes(chunk)):
                    return
            made = rows_in_pass // self.batch
            if made == 0:
                self._hold(RuntimeError("this worker's stream split is empty: the dataset has fewer items than the "
                                        "trial's workers x batch"), 0)
                return
            planned += made
            if not self._hold(_End(), 0):
                return

    def _hold(self, item, size: int) -> bool:
        with self._cond:
            while self._chunks and self._held + size > self._limit and len(self._chunks) >= 2 and not self._stop.is_set():
                self._cond.wait(0.5)
            if self._stop.is_set():
                return False
            self._chunks.append((item, size))
            self._held += size
            self._cond.notify_all()
        return True

    def _take(self):
        with self._cond:
            while not self._chunks:
                if self._stop.is_set():
                    return None
                self._cond.wait(0.5)
            item, size = self._chunks.pop(0)
            self._held -= size
            self._cond.notify_all()
        return item

    # the cutter: shuffled, prepared chunks cut into whole batches
    def _cut_all(self) -> None:
        made, passes, carry = 0, 0, None
        rng = np.random.default_rng(self.seed)
        while made < self.total:
            item = self._take()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _End):  # the pass's partial last batch is dropped
                carry, passes = None, passes + 1
                rng = np.random.default_rng((self.seed, passes))
                continue
            chunk = take(item, rng.permutation(rows(item)))
            if carry is not None:
                chunk = join(carry, chunk)
            n = rows(chunk)
            whole = n - n % self.batch
            carry = take(chunk, slice(whole, n)) if whole < n else None
            if whole == 0:
                continue
            prepared = self._prepare(take(chunk, slice(0, whole)))
            for lo in range(0, whole, self.batch):
                if made == self.total or not self._put(self._cut(prepared, lo, lo + self.batch)):
                    return
                made += 1
