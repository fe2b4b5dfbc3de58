"""Rank 0's test split when the data is streamed: read once as the worker starts, before the train split's first
pass (`TestRead`, begun by raylab/data/shard.py read_early), kept in memory where it fits the read-ahead, and cut
into prepared batches for each evaluation (`TestPass`); `TestRange` reports the test inputs' range."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from raylab.data import num_items, tree_map
from raylab.data.stream import StreamInfo


class TestRange:
    """The built report's test-input range, read off rank 0's evaluations when the trial reports."""

    def __init__(self, data):  # a raylab/data/shard.py StreamShard
        self.data = data

    def summary(self) -> str:
        seen = self.data._test.range if self.data._test is not None else None
        if seen is None:
            return "test inputs not read (no evaluation ran)"
        return f"test inputs {seen[2]} in [{seen[0]:.4g}, {seen[1]:.4g}]"


class TestRead:
    """Rank 0's first read of the test split, started with the training function (read_early) on a thread of its
    own, ahead of the train reader's first pass: the first evaluation then finds the split read, and no training pass
    waits behind an epoch-end read (a second Ray Data execution in the worker, seconds on a small machine). The train
    reader starts no pass while it runs (TEST_READ): two executions side by side on one data CPU took 13-16 s each.
    `chunks`: the dense chunks read, kept while the split fits READ_AHEAD_BYTES (estimated from the first chunk and
    the split's rows); None where it does not fit, and then every evaluation reads the split itself."""

    def __init__(self, dataset, info: StreamInfo, rows: int):
        import threading

        from raylab.data.deliver import TEST_READ, TEST_READ_DONE

        self.dataset, self.info, self.rows = dataset, info, rows
        self.chunks: list | None = []
        self.error: BaseException | None = None
        self.seconds: float | None = None  # how long the read took, once it ended
        self._t0 = time.perf_counter()
        TEST_READ_DONE.clear()
        TEST_READ.set()  # before the train reader exists: its first pass waits for this read
        self._thread = threading.Thread(target=self._read, name="raylab-test-read", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        from raylab.data.chunks import nbytes, numpy_block, rows
        from raylab.data.deliver import PREFETCH_BATCHES, READ_AHEAD_BYTES, TEST_READ, TEST_READ_DONE

        try:
            for block in self.dataset.iter_batches(
                batch_size=self.rows, batch_format="pyarrow", prefetch_batches=PREFETCH_BATCHES
            ):
                chunk = numpy_block(block, tuple(dict.fromkeys(self.info.names())))
                if rows(chunk) and nbytes(chunk) / rows(chunk) * self.info.test_items > READ_AHEAD_BYTES:
                    self.chunks = None  # too large to keep: the evaluations read it
                    return
                self.chunks.append(chunk)
        except BaseException as e:  # noqa: BLE001 - raised where the first evaluation asks for the split
            self.error = e
        finally:
            self.seconds = time.perf_counter() - self._t0
            TEST_READ.clear()
            TEST_READ_DONE.set()

    def result(self) -> list | None:
        """The chunks read (after waiting for the read to end), None where the split was too large to keep."""
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.chunks


class TestPass:
    """Rank 0's test split, prepared and cut into batches of `size`: from TestRead's chunks where it kept them,
    else read from Ray Data in chunks at each evaluation; kept in memory after the first whole pass when it fits
    READ_AHEAD_BYTES (then later evaluations read nothing), and the range of its inputs noted (the built
    report's)."""

    def __init__(self, dataset, info: StreamInfo, prepare: Callable, size: int, early: TestRead | None = None):
        self.dataset, self.info, self.prepare, self.size, self.early = dataset, info, prepare, size, early
        self.kept: list | None = None
        self.range: tuple[float, float, str] | None = None  # lowest, highest, the dtypes
        self.read_early: float | None = None  # seconds TestRead took, where its chunks were kept

    def __iter__(self):
        if self.kept is None and self.early is not None:
            early, self.early = self.early, None
            chunks = early.result()
            if chunks is not None:
                self.read_early = early.seconds
                self.kept = list(self._batches(self._rechunked(chunks)))
        if self.kept is not None:
            yield from self.kept
            return
        from raylab.data.deliver import TEST_READ, TEST_READ_DONE

        TEST_READ_DONE.clear()
        TEST_READ.set()  # the train reader starts no new pass meanwhile
        try:
            yield from self._batches(self._read())
        finally:
            TEST_READ.clear()
            TEST_READ_DONE.set()

    def _rechunked(self, chunks: list):
        """The kept chunks as one split, handed out chunk_rows(size) rows at a time (whole batches but the last)."""
        from raylab.data.chunks import chunk_rows

        whole = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]} if chunks else {}
        n = num_items(next(iter(whole.values()))) if whole else 0
        step = chunk_rows(self.size)
        for start in range(0, n, step):
            yield {k: a[start : start + step] for k, a in whole.items()}

    def _read(self):
        from raylab.data.chunks import chunk_rows, numpy_block
        from raylab.data.deliver import PREFETCH_BATCHES

        names = tuple(dict.fromkeys(self.info.names()))
        for block in self.dataset.iter_batches(
            batch_size=chunk_rows(self.size), batch_format="pyarrow", prefetch_batches=PREFETCH_BATCHES
        ):
            yield numpy_block(block, names)

    def _batches(self, chunks):
        """Prepared batches of `size` from dense chunks; kept (self.kept) after a whole pass under READ_AHEAD_BYTES."""
        from raylab.data.chunks import nbytes
        from raylab.data.deliver import READ_AHEAD_BYTES

        kept, held, lo, hi, dtypes = [], 0, float("inf"), float("-inf"), {}
        for chunk in chunks:
            held += nbytes(chunk)
            x, y = self.prepare(*self.info.split(chunk))
            for a in x.values() if isinstance(x, dict) else [x]:
                dtypes[str(a.dtype)] = None
                if len(a):
                    lo, hi = min(lo, float(np.min(a))), max(hi, float(np.max(a)))
            for start in range(0, num_items(y), self.size):
                b = tuple(tree_map(lambda a: a[start : start + self.size], part) for part in (x, y))
                if kept is not None:
                    kept.append(b)
                yield b
            if held > READ_AHEAD_BYTES:
                kept = None
        if lo <= hi:
            self.range = (lo, hi, "/".join(dtypes))
        self.kept = kept
