"""A streamed split's shuffle without a cluster (raylab/data/shuffle.py, raylab/data/deliver.py): the window over a
label-sorted split, every row once a pass in a new seeded order, what a trial records of it, and the line a
sorted split the window cannot hold gets (issue 49: a label-sorted table trained to 0.71-0.74 where shuffled
rows trained past 0.94)."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.data import shuffle
from raylab.data.deliver import Delivery, Reader
from raylab.data.shuffle import SortedLook, Window, aligned_shards, describe, window_rows
from raylab.loop import StreamBatches

CLASSES, PER_CLASS, BATCH, CHUNK = 5, 2400, 64, 2048  # the table: 12,000 rows sorted by label


def sorted_table(passes: list | None = None):
    """start_pass() of the issue's table as Ray Data hands it, sorted by label, in 2,048-row chunks; row i's x is i."""

    def start_pass():
        if passes is not None:
            passes.append(len(passes))
        ids = np.arange(CLASSES * PER_CLASS)
        return ({"x": ids[i : i + CHUNK], "y": ids[i : i + CHUNK] // PER_CLASS} for i in range(0, len(ids), CHUNK))

    return start_pass


def delivered(split_rows, passes: int = 2, seed: int = 0, look=None) -> tuple[Delivery, list]:
    steps = CLASSES * PER_CLASS // BATCH
    delivery = Delivery(
        Reader(sorted_table(), ("x", "y")),
        BATCH,
        seed,
        lambda c: (c["x"], c["y"]),
        lambda xy, lo, hi: (xy[0][lo:hi], xy[1][lo:hi]),
        steps * passes,
        split_rows=split_rows,
        order="files in a new seeded order every pass",
        look=look,
    )
    batches = [delivery.next() for _ in range(steps * passes)]
    delivery.close()
    return delivery, [batches[p * steps : (p + 1) * steps] for p in range(passes)]


def classes_per_batch(batches) -> float:
    return float(np.mean([len(np.unique(y)) for _, y in batches]))


def test_a_sorted_split_the_window_holds_is_shuffled_whole_every_pass():
    """The window holds the worker's split: each pass every row once, batches of every class (as a shuffled split's:
    5 classes in 64 rows), a new order each pass, the same for the same seed; recorded as "global"."""
    delivery, passes = delivered(split_rows=CLASSES * PER_CLASS)
    steps = CLASSES * PER_CLASS // BATCH
    for batches in passes:
        rows = np.concatenate([x for x, _ in batches])
        assert len(rows) == steps * BATCH and len(set(rows.tolist())) == len(rows)  # every row at most once
        assert all((y == x // PER_CLASS).all() for x, y in batches)  # each row its own label
        assert classes_per_batch(batches) > 4.9
    orders = [np.concatenate([x for x, _ in batches]) for batches in passes]
    assert not (orders[0] == orders[1]).all()  # a new order each pass
    _, again = delivered(split_rows=CLASSES * PER_CLASS)
    assert (np.concatenate([x for x, _ in again[0]]) == orders[0]).all()  # seeded
    assert delivery.shuffle() == "global" and delivery.window.capacity == CLASSES * PER_CLASS


def test_a_window_smaller_than_the_split_mixes_more_than_a_chunk_and_says_how_large_it_is(monkeypatch):
    """A window of 6,000 rows (half the split) still hands every row out once a pass, and its batches mix more
    classes than the chunk shuffle did (1-2 per batch); the trial records the window and the source's order."""
    monkeypatch.setattr(shuffle, "WINDOW_BYTES", 6000 * 16)  # x and y: 16 bytes a row
    delivery, passes = delivered(split_rows=CLASSES * PER_CLASS)
    assert delivery.window.capacity == 6000
    rows = np.concatenate([x for x, _ in passes[0]])
    assert len(set(rows.tolist())) == len(rows)
    assert classes_per_batch(passes[0]) > 2.5
    assert delivery.shuffle() == "window 6,000 rows, files in a new seeded order every pass"


def test_the_window_hands_out_every_row_once_however_chunks_and_window_compare():
    rng = np.random.default_rng(1)
    for capacity, chunk, n in ((7, 3, 20), (3, 7, 20), (50, 4, 20), (1, 1, 5)):
        window = Window(capacity)
        window.start(np.random.default_rng(0))
        out = []
        for lo in range(0, n, chunk):
            out += window.add({"x": np.arange(lo, min(lo + chunk, n)), "z": rng.random((min(chunk, n - lo), 2))})
        out += list(window.drain(4))
        got = np.concatenate([o["x"] for o in out])
        assert sorted(got.tolist()) == list(range(n)), (capacity, chunk)
        assert all(len(o["x"]) == len(o["z"]) for o in out)
        assert window.filled == 0


def test_window_rows_fit_the_split_or_the_bytes():
    assert window_rows(12000, 88.0, CHUNK) == 12000  # the table: the whole split
    assert window_rows(10**9, 1024.0, CHUNK) == shuffle.WINDOW_BYTES // 1024
    assert window_rows(10**9, 10**9, CHUNK) == CHUNK  # never less than a chunk
    assert window_rows(None, 1024.0, 512, limit=1 << 20) == 1024
    assert describe(5, 5, "x") == "global" and describe(None, None, "x") == "not started"


def test_sorted_first_chunks_are_told_from_shuffled_and_imbalanced_ones():
    y = np.arange(12000) // 2400
    look = SortedLook()
    assert [look.add(y[i : i + CHUNK]) for i in range(0, 4 * CHUNK, CHUNK)] == [None, None, None, True]
    look = SortedLook()
    assert look.add(np.random.default_rng(0).permutation(y)[:CHUNK]) is False  # a class came back at once
    rare = np.zeros(4 * CHUNK, np.int64)
    rare[[100, 5000]] = 1  # one in 4,000 rows: imbalanced, not sorted
    look = SortedLook()
    assert [look.add(rare[i : i + CHUNK]) for i in range(0, 4 * CHUNK, CHUNK)][-1] is False
    look = SortedLook()
    assert [look.add(np.zeros(CHUNK, np.int64)) for _ in range(4)][-1] is False  # one class: nothing to say
    assert SortedLook().add(np.linspace(0, 1, CHUNK)) is False  # a regression target is no class


def test_a_sorted_split_the_window_cannot_hold_is_said_once(monkeypatch):
    said = []
    monkeypatch.setattr(shuffle, "WINDOW_BYTES", 6000 * 16)
    delivered(split_rows=CLASSES * PER_CLASS, look=("y", said.append))
    assert len(said) == 1 and "looks sorted by 'y'" in said[0] and "6,000 of a worker's 12,000 rows" in said[0]
    assert "df.sample(frac=1" in said[0] and "\n" not in said[0]
    monkeypatch.setattr(shuffle, "WINDOW_BYTES", 256 << 20)
    said.clear()
    delivered(split_rows=CLASSES * PER_CLASS, look=("y", said.append))  # the window holds it: nothing to fix
    assert said == []


def test_an_epoch_of_a_streamed_source_is_still_steps_per_epoch_whole_batches():
    """The window changes no count: a pass of 12,000 rows is 187 batches of 64, the 32 rows over dropped."""
    passes: list = []
    reader = Reader(sorted_table(passes), ("x", "y"))
    deliveries = type(
        "D",
        (),
        {
            "epochs": 2,
            "start": lambda self, total: Delivery(
                reader, BATCH, 0, lambda c: (c["x"], c["y"]), lambda xy, lo, hi: (xy[0][lo:hi], xy[1][lo:hi]), total
            ),
        },
    )()
    source = StreamBatches(deliveries, steps_per_epoch=187)
    got = [source.next() for _ in range(2 * 187)]
    assert all(len(x) == BATCH for x, _ in got) and source.figures()["stream_passes"] == 2
    source.close()


@pytest.mark.parametrize("rows, aligned", [((3, 4), True), ((4, 3), False)])
def test_npy_columns_are_shuffled_file_by_file_only_where_their_shards_line_up(tmp_path, rows, aligned):
    for column, counts in (("x", (3, 4)), ("y", rows)):
        (tmp_path / column).mkdir()
        for i, n in enumerate(counts):
            np.save(tmp_path / column / f"part-{i}.npy", np.zeros((n, 2)))
    assert aligned_shards([str(tmp_path / "x"), str(tmp_path / "y")]) is aligned
    assert aligned_shards(["gs://bucket/x", str(tmp_path / "y")]) is False
