"""Streamed data without the shared runs: the scenes generator at the seed's size trained, and Ray Data's delivery
read by raylab's Reader, Delivery and TestRead on the shared local cluster (no Ray Train start-up); the export of
an image folder. (The label-sorted file trained in every framework: test_stream.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 1  # the scenes generator's trial
SECONDS = 100


def test_scenes_at_the_seed_size_stream_into_resunet_train(run_recipe):
    """recipes/resunet_stream.py: 1.2 million generated scenes (nothing on disk or on the driver); --quick
    trains torch:none on the first 40."""
    recipe = load_recipe("resunet_stream")
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "torch:none")
    assert code == 0, summary
    run = client.get_run(summary["trials"][0]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["data"] == "scenes" and run.data.params["train_samples"] == "40"
    assert run.data.metrics["val_mask_iou"] >= 0 and run.data.metrics["input_wait_s"] >= 0


def test_parquet_as_pandas_writes_it_is_delivered_as_contiguous_batches(ray_cluster, tmp_path):
    """A list<float> column and scalar columns stacked into one input, read by Ray Data (no Ray Train start-up) and
    cut into batches by the worker's Reader and Delivery: every row of a pass once, in whole batches of float32
    [64, 20] and [64, 3], for two passes."""
    import pandas as pd

    from raylab.data.chunks import chunk_rows

    from raylab.data.deliver import Delivery, Reader
    from raylab.data.opened import open_stream
    from raylab.data.stream import parquet, stacked

    rng = np.random.default_rng(0)
    for split, n in (("train", 1000), ("test", 200)):
        (tmp_path / split).mkdir()
        x = rng.normal(size=(n, 20)).astype(np.float32)
        for i, part in enumerate(np.array_split(np.arange(n), 4)):
            pd.DataFrame(
                {
                    "features": list(x[part]),
                    "a": part.astype(np.int32),
                    "b": part * 2.0,
                    "c": part * 3.0,
                    "label": part % 5,
                }
            ).to_parquet(tmp_path / split / f"part-{i}.parquet")
    for inputs, width in (("features", 20), (stacked("a", "b", "c"), 3)):
        opened = open_stream(
            parquet(train=str(tmp_path / "train"), test=str(tmp_path / "test"), inputs=inputs, targets="label")
        )
        assert (opened.info.train_items, opened.info.test_items) == (1000, 200)
        train = opened.datasets["train"]
        reader = Reader(
            lambda: train.iter_batches(batch_size=chunk_rows(64), batch_format="pyarrow"), opened.info.names()
        )
        delivery = Delivery(
            reader,
            64,
            0,
            lambda c: opened.info.split(c),
            lambda xy, lo, hi: (xy[0][lo:hi], xy[1][lo:hi]),
            total=2 * (1000 // 64),
        )
        batches = [delivery.next() for _ in range(2 * (1000 // 64))]
        assert all(x.shape == (64, width) and len(y) == 64 for x, y in batches)
        if width == 3:  # each row's own a, b, c side by side, and its own label
            rows = np.concatenate([x for x, _ in batches[: 1000 // 64]])
            assert (rows[:, 1] == 2 * rows[:, 0]).all() and (rows[:, 2] == 3 * rows[:, 0]).all()
            assert len(set(rows[:, 0].tolist())) == len(rows)  # every row of the pass once
            assert all((y == x[:, 0] % 5).all() for x, y in batches)
        assert delivery.passes == 2


def test_rank0_reads_the_test_split_once_ahead_and_again_only_where_it_is_too_large(ray_cluster, tmp_path, monkeypatch):
    """Rank 0's test split, read by Ray Data (no Ray Train start-up): TestRead reads it on its own thread while the
    train reader waits (TEST_READ), and evaluations cut the kept rows into whole batches of 512 without reading
    again; where the first chunk says the split will not fit the read-ahead, nothing is kept and every evaluation
    reads it, every row once each time."""
    import pandas as pd

    from raylab.data import deliver
    from raylab.data.held_out import TestPass, TestRead
    from raylab.data.opened import open_stream
    from raylab.data.stream import parquet

    x = np.arange(3000 * 4, dtype=np.float32).reshape(3000, 4)
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        for i, part in enumerate(np.array_split(np.arange(3000), 3)):
            pd.DataFrame({"x": list(x[part]), "y": part % 3}).to_parquet(tmp_path / split / f"part-{i}.parquet")
    opened = open_stream(parquet(train=str(tmp_path / "train"), test=str(tmp_path / "test")))
    test = opened.datasets["test"]

    def rows_of(batches):
        return sorted(np.concatenate([b[0] for b in batches])[:, 0].tolist())

    early = TestRead(test, opened.info, rows=1024)
    assert deliver.TEST_READ.is_set()  # set before the read's thread runs: the train reader's first pass waits
    evaluations = TestPass(test, opened.info, lambda x, y: (x * 2, y), 512, early=early)
    first = list(evaluations)
    assert not deliver.TEST_READ.is_set() and early.seconds > 0 and evaluations.read_early == early.seconds
    assert [len(b[1]) for b in first] == [512] * 5 + [440]  # whole batches across the files' blocks
    assert rows_of(first) == sorted((x[:, 0] * 2).tolist()) and evaluations.range == (0.0, 2 * x.max(), "float32")
    assert evaluations.kept is not None and list(evaluations) == first  # from memory

    monkeypatch.setattr(deliver, "READ_AHEAD_BYTES", 16 << 10)  # 48 KB of rows: over it from the first chunk
    early = TestRead(test, opened.info, rows=1024)
    assert early.result() is None and not deliver.TEST_READ.is_set()
    evaluations = TestPass(test, opened.info, lambda x, y: (x, y), 512, early=early)
    for _ in range(2):
        assert rows_of(list(evaluations)) == sorted(x[:, 0].tolist())
    assert evaluations.kept is None and evaluations.read_early is None


def test_files_come_in_a_new_order_every_pass_each_rows_columns_together(ray_cluster, tmp_path):
    """.npy shards that line up file for file (one directory per column, zipped by Ray Data) and Parquet files are
    read in a new order every pass (each an execution of the dataset; no Ray Train start-up), and every row keeps
    its own columns; shards that do not line up keep their order."""
    import pandas as pd

    from raylab.data.opened import open_stream

    from raylab.data.stream import npy, parquet

    for split in ("train", "test"):
        for column in ("x", "y", "parquet"):
            (tmp_path / split / column).mkdir(parents=True)
        for i in range(6):
            ids = np.arange(i * 10, i * 10 + 10)
            np.save(tmp_path / split / "x" / f"part-{i}.npy", ids[:, None] * np.array([1.0, 2.0], np.float32))
            np.save(tmp_path / split / "y" / f"part-{i}.npy", ids)
            pd.DataFrame({"x": list(ids[:, None] * np.array([1.0, 2.0])), "y": ids}).to_parquet(
                tmp_path / split / "parquet" / f"part-{i}.parquet"
            )
    paths = {split: {c: str(tmp_path / split / c) for c in "xy"} for split in ("train", "test")}
    for stream in (
        npy(paths["train"], paths["test"]),
        parquet(train=str(tmp_path / "train" / "parquet"), test=str(tmp_path / "test" / "parquet")),
    ):
        assert "new seeded order every pass" in stream.order
        train = open_stream(stream, seed=3).datasets["train"]
        orders = set()
        for _ in range(3):
            batches = list(train.iter_batches(batch_size=None, batch_format="numpy"))
            x, y = (
                np.concatenate([np.stack(list(b[k])) if b[k].dtype == object else b[k] for b in batches])
                for k in ("x", "y")
            )
            assert sorted(y.tolist()) == list(range(60)) and (x[:, 0] == y).all() and (x[:, 1] == 2 * y).all()
            orders.add(tuple(y[::10].tolist()))  # the files' first rows, in the order read
        assert len(orders) > 1, (stream.name, orders)
    np.save(tmp_path / "train" / "y" / "part-5.npy", np.arange(50, 61))  # one row more: the files no longer line up
    assert "source's order" in npy(paths["train"], paths["test"]).order


def test_export_turns_an_image_folder_into_parquet_of_the_same_pixels(ray_cluster, tmp_path):
    """`raylab data export` of a recipe whose data is an image folder: the test split's pixels are PIL's own."""
    from PIL import Image

    from raylab.cli.data import data_main
    from raylab.data.opened import open_stream
    from raylab.data.stream import parquet

    rng = np.random.default_rng(1)
    for split, n in (("train", 40), ("test", 12)):
        for i in range(n):
            folder = tmp_path / "pngs" / split / f"class{i % 2}"
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (10, 12, 3), dtype=np.uint8)).save(folder / f"{i:03d}.png")
    recipe = tmp_path / "pngs_recipe.py"
    recipe.write_text(f"""from raylab.data import stream
from recipes.fashion import RECIPE as FASHION
RECIPE = FASHION.variant(name="pngs", data=stream.images({str(tmp_path / "pngs" / "train")!r},
                         {str(tmp_path / "pngs" / "test")!r}, size=(10, 12)))
""")
    out = tmp_path / "exported"
    assert data_main(["export", str(recipe), str(out)]) == 0
    opened = open_stream(parquet(str(out)))
    assert (opened.info.train_items, opened.info.test_items) == (40, 12)
    test = next(iter(opened.datasets["test"].iter_batches(batch_size=100, batch_format="numpy")))  # one file
    files = sorted((tmp_path / "pngs" / "test").glob("*/*.png"), key=lambda f: (f.parent.name, f.name))
    assert test["x"].shape == (12, 10, 12, 3) and test["x"].dtype == np.uint8
    assert (test["x"] == np.stack([np.asarray(Image.open(f)) for f in files])).all()
    assert (test["y"] == [int(f.parent.name[-1]) for f in files]).all()
