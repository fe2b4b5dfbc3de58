"""A streamed split's shuffle: rows mixed across a window of the split, in a new seeded order every pass.

A stream arrives in the order its source holds it. A file exported from a database, or written class by class, is
often sorted by label, and shuffling rows only within each chunk of a few thousand (what the delivery did before
issue 49) left batches of one or two classes: a label-sorted table of 12,000 rows trained to 0.71-0.74 test
accuracy where the same rows shuffled trained past 0.94. The cutter (raylab/data/deliver.py) therefore draws rows
from a window, tf.data's shuffle buffer taken a chunk at a time rather than a row at a time:

- the window fills with the pass's first rows and hands out nothing meanwhile;
- then each chunk that comes in takes the places of as many rows drawn at random from the window, which go out;
- at the pass's end the rest of the window goes out in a random order.

A window as large as the worker's split is a shuffle of the whole split (`global`): nothing goes out until the
pass is read, then all of it in one permutation. The reader reads the next pass meanwhile (READ_AHEAD_BYTES), so
the step waits for a whole pass only once, at the start. A window that holds WINDOW_BYTES of rows (the split being
larger) mixes each row with the WINDOW_BYTES around it, and the source's files or blocks are read in a new order
every pass (per_pass, blocks_per_pass, aligned_shards below; raylab/data/stream.py) to mix the rest.

Rows are copied twice (into the window, out of it), as the chunk shuffle copied them (a permutation, then the
carried partial batch joined on), but drawn from the whole window rather than from a chunk in the cache: 0.2-0.4 us
more a row of 1-3 kB, beside the 16-140 us Ray Data takes to hand a row over (bench/results.md, "A streamed epoch is
a shuffled epoch").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

WINDOW_BYTES = 256 << 20  # rows a worker's shuffle window holds, as read (before the recipe's preprocessing)


def window_rows(split_rows: int | None, row_bytes: float, chunk_rows: int, limit: int | None = None) -> int:
    """Rows the window holds: the worker's whole split where it fits in `limit` bytes (WINDOW_BYTES), else as many
    rows as do (never fewer than a chunk's). split_rows None: not known, as many rows as fit."""
    fits = max(chunk_rows, int((WINDOW_BYTES if limit is None else limit) // max(row_bytes, 1.0)))
    return fits if split_rows is None else max(1, min(split_rows, fits))


def describe(window: int | None, pass_rows: int | None, order: str) -> str:
    """The `shuffle` a trial records: "global" where the window held a whole pass of the worker's split, else the
    window's rows and the source's order (`order`, raylab/data/stream.py Stream.order)."""
    if window is None or pass_rows is None:
        return "not started"
    if window >= pass_rows:
        return "global"
    # not the split's rows: trials of the same data on 1 and 2 workers had the same shuffle (parity compares it)
    return f"window {window:,} rows, {order}"


class Window:
    """A worker's shuffle window of `capacity` rows (chunks: dicts of numpy arrays, a row per index), emptied at
    each pass's end and filled again by the next, with that pass's own generator (`start`)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.pool: dict | None = None  # the window's rows, allocated at the first chunk, kept across passes
        self.filled = 0
        self.rng = np.random.default_rng(0)

    def start(self, rng: np.random.Generator) -> None:
        """A new pass: its rows drawn with `rng` (seeded per pass by the cutter)."""
        self.rng, self.filled = rng, 0

    def add(self, chunk: dict) -> list[dict]:
        """Takes a chunk in; the rows that go out for it (none while the window fills), in random order."""
        n = len(next(iter(chunk.values())))
        if self.pool is None:
            self.pool = {k: np.empty((self.capacity, *a.shape[1:]), a.dtype) for k, a in chunk.items()}
        room = min(self.capacity - self.filled, n)
        for k, a in chunk.items():
            self.pool[k][self.filled : self.filled + room] = a[:room]
        self.filled += room
        # a chunk larger than the window's room: its rest a window's worth at a time
        return [
            self._swap({k: a[lo : lo + self.capacity] for k, a in chunk.items()})
            for lo in range(room, n, self.capacity)
        ]

    def _swap(self, rows: dict) -> dict:
        """Draws len(rows) rows from the (full) window at random and puts `rows` in their places."""
        n = len(next(iter(rows.values())))
        slots = self.rng.choice(self.capacity, n, replace=False)
        out = {k: p[slots] for k, p in self.pool.items()}
        for k, a in rows.items():
            self.pool[k][slots] = a
        return out

    def drain(self, piece: int):
        """The pass has ended: the window's rows in a random order, `piece` rows at a time (a generator: one piece
        is copied out at a time); the window is empty after."""
        order = self.rng.permutation(self.filled)
        self.filled = 0
        for lo in range(0, len(order), piece):
            yield {k: p[order[lo : lo + piece]] for k, p in self.pool.items()}


class SortedLook:
    """Whether a split's first chunks look sorted by a class target: more than one class among them, each class in
    one run of rows (a split sorted or written class by class; a shuffled one breaks runs in its first chunk).
    add(targets) for each chunk as read, before the window; `verdict` is True or False once the first `chunks`
    chunks were seen (or a class came back earlier), None before, and False for a target that is no class (not
    integer, or more than one value a row)."""

    def __init__(self, chunks: int = 4):
        self.left, self.verdict = chunks, None
        self.classes: set = set()
        self.changes, self.last, self.rows = 0, None, 0

    def add(self, y) -> bool | None:
        if self.verdict is not None:
            return self.verdict
        y = np.asarray(y)
        y = y.reshape(len(y), -1)[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y
        if y.ndim != 1 or not (np.issubdtype(y.dtype, np.integer) or y.dtype == bool):
            self.verdict = False
            return False
        if len(y):
            self.changes += int(np.count_nonzero(y[1:] != y[:-1])) + int(self.last is not None and y[0] != self.last)
            self.classes.update(np.unique(y).tolist())
            self.last, self.rows = y[-1], self.rows + len(y)
        self.left -= 1
        if self.changes > len(self.classes) - 1:  # a class came back: not one run each
            self.verdict = False
        elif self.left == 0:
            self.verdict = len(self.classes) > 1
        return self.verdict


# -- the sources' order of files or blocks, a new one every pass (raylab/data/stream.py) ----------------------
def per_pass(seed: int):
    """Ray Data's file shuffle, seeded: a new order every execution of the dataset (every pass), the same in every
    run of a seed (Ray Data adds its count of the dataset's executions to the seed)."""
    from ray.data import FileShuffleConfig

    return FileShuffleConfig(seed=seed, reseed_after_execution=True)


def blocks_per_pass(ds, seed: int):
    """ds with its blocks in a new seeded order every pass (as per_pass does files). An all-to-all step: every block
    of `ds` is made before the first goes on, so only small blocks (file names, ids) are reordered this way."""
    from ray.data import RandomSeedConfig

    return ds.randomize_block_order(seed=RandomSeedConfig(seed=seed, reseed_after_execution=True))


def aligned_shards(folders: list[str]) -> bool:
    """Whether every column's .npy files line up file for file (as many files, as many rows in each, in sorted
    order, the order Ray Data lists them in): then one seeded order of files keeps each row's columns together.
    Remote folders are not listed: False."""
    if any("://" in f or not Path(f).is_dir() for f in folders):
        return False
    rows = []
    for folder in folders:
        counts = []
        for f in sorted(str(p) for p in Path(folder).rglob("*.npy")):  # Ray Data sorts the paths as strings
            with open(f, "rb") as fh:
                major, _ = np.lib.format.read_magic(fh)
                header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                counts.append(header(fh)[0][:1])
        rows.append(counts)
    return all(r == rows[0] for r in rows)
