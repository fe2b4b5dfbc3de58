"""Streamed data without a cluster: the batch source's passes and restarts, the sources' checks, the CPU left
to Ray Data, the export's files, and the mistakes refused before Ray starts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from raylab import cli
from raylab.data.chunks import dense
from raylab.data.deliver import Delivery, Reader
from raylab.data.files import MANIFEST
from raylab.data.stream import StreamInfo, images, parquet, stacked
from raylab.driver.resources import reservation
from raylab.errors import UserError
from raylab.loop import StreamBatches
from raylab.registry import get_strategy
from tests.unit.test_config import RECIPE, no_ray  # noqa: F401 - a fixture, used by name


class NumberedPasses:
    """What StreamBatches starts (raylab/data/shard.py Deliveries) over fake passes: pass p is `sizes[p]` rows
    numbered p * 1000 + i, handed over in numpy chunks of `chunk` rows (as Ray Data hands a split's pass)."""

    def __init__(self, sizes: list[int], batch: int, chunk: int = 4, epochs: int = 1):
        self.sizes, self.batch, self.chunk, self.epochs, self.started = sizes, batch, chunk, epochs, 0

    def start_pass(self):
        p = self.started
        self.started += 1
        n = self.sizes[min(p, len(self.sizes) - 1)]
        ids = p * 1000 + np.arange(n)
        return ({"x": ids[i : i + self.chunk], "y": ids[i : i + self.chunk] % 7} for i in range(0, n, self.chunk))

    def start(self, total: int):
        return Delivery(
            Reader(self.start_pass, ("x", "y")),
            self.batch,
            0,
            lambda c: (c["x"], c["y"]),
            lambda xy, lo, hi: (xy[0][lo:hi], xy[1][lo:hi]),
            total,
        )


def passes_of(batches) -> list[int]:
    return [int(x[0]) // 1000 for x, _ in batches]


def test_passes_follow_each_other_cut_into_whole_shuffled_batches():
    source = StreamBatches(NumberedPasses([10], batch=3, epochs=3), steps_per_epoch=3)
    got = [source.next() for _ in range(9)]
    assert passes_of(got) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # 10 rows: 3 whole batches a pass, the 10th row dropped
    for x, y in got:
        assert len(x) == 3 and len({int(v) // 1000 for v in x}) == 1 and (y == x % 7).all()
    first = np.concatenate([x for x, _ in got[:3]])
    assert len(set(first.tolist())) == 9 and sorted(first.tolist()) != first.tolist()  # shuffled within chunks
    figures = source.figures()
    assert figures["stream_passes"] == 3 and figures["stream_skipped_batches"] == 0  # no 4th pass read
    assert figures["stream_read_early"] == 0
    assert source.wait_s >= 0 and figures["stream_first_wait_s"] >= 0


def test_an_epoch_is_steps_per_epoch_batches_whatever_a_pass_holds():
    source = StreamBatches(NumberedPasses([7], batch=3, epochs=2), steps_per_epoch=3)  # a pass: 2 batches
    assert passes_of([source.next() for _ in range(6)]) == [0, 0, 1, 1, 2, 2]


def test_restart_reads_past_the_batches_its_epoch_had_trained_on():
    source = StreamBatches(NumberedPasses([16], batch=4, epochs=3), steps_per_epoch=4)
    source.restart(6)  # a checkpoint 2 steps into the second epoch
    assert source.figures()["stream_skipped_batches"] == 2
    assert passes_of([source.next() for _ in range(3)]) == [0, 0, 1]


def test_an_empty_split_says_so():
    empty = StreamBatches(NumberedPasses([2], batch=3), steps_per_epoch=3)
    with pytest.raises(RuntimeError, match="split is empty"):
        empty.next()


def test_arrow_columns_become_contiguous_arrays_and_uneven_rows_name_their_column():
    import pyarrow as pa
    from ray.data.extensions import ArrowTensorArray

    x = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    table = pa.table(
        {
            "list": pa.array([list(r) for r in x[:, 0]]),
            "fixed": pa.FixedSizeListArray.from_arrays(pa.array(x[:, 0].ravel()), 3),
            "nested": pa.array([[list(a) for a in r] for r in x]),
            "tensor": ArrowTensorArray.from_numpy(x),
            "label": pa.array([1, 2, 3, 4], pa.int8()),
        }
    )
    got = dense(table.slice(1), ["list", "fixed", "nested", "tensor", "label"])  # a slice: offsets respected
    for name in ("list", "fixed"):
        assert got[name].shape == (3, 3) and (got[name] == x[1:, 0]).all() and got[name].dtype == np.float32
    assert (got["nested"] == x[1:]).all() and (got["tensor"] == x[1:]).all() and got["label"].dtype == np.int8
    uneven = pa.table({"features": pa.array([[1.0, 2.0], [1.0, 2.0], [3.0]])})
    with pytest.raises(UserError, match="column 'features': rows hold lists of different lengths"):
        dense(uneven, ["features"])
    with pytest.raises(UserError, match="no column 'x'"):
        dense(uneven, ["x"])
    with pytest.raises(UserError, match="column 'y' has 1 missing"):
        dense(pa.table({"y": pa.array([1, None])}), ["y"])


def test_stacked_columns_are_one_input():
    info = StreamInfo(stacked("a", "b", "c"), "y", 10, 2)
    assert info.names() == ("a", "b", "c", "y")
    x, y = info.split({"a": np.zeros(4), "b": np.ones(4), "c": np.full(4, 2.0), "y": np.arange(4)})
    assert x.shape == (4, 3) and (x[:, 2] == 2).all() and (y == np.arange(4)).all()
    with pytest.raises(UserError, match="stacked"):
        stacked()


def test_stream_info_splits_named_columns_and_stacks_list_columns():
    rows = np.empty(2, dtype=object)
    rows[:] = [np.zeros(3), np.ones(3)]
    info = StreamInfo("x", ("mask", "depth"), 10, 2)
    x, y = info.split({"x": rows, "mask": np.zeros((2, 4)), "depth": np.ones((2, 4)), "extra": np.arange(2)})
    assert x.shape == (2, 3) and x.dtype == np.float64
    assert set(y) == {"mask", "depth"} and y["depth"].shape == (2, 4)


def test_parquet_needs_a_directory_raylab_wrote(tmp_path):
    with pytest.raises(UserError, match="raylab data export"):
        parquet(str(tmp_path / "absent"))
    with pytest.raises(UserError, match=f"no {MANIFEST} there"):
        parquet(str(tmp_path))
    (tmp_path / MANIFEST).write_text(
        json.dumps({"name": "n", "inputs": ["a", "b"], "targets": "y", "train_items": 4, "test_items": 2})
    )
    stream = parquet(str(tmp_path))
    assert stream.inputs == ("a", "b") and (stream.train_items, stream.test_items) == (4, 2) and stream.streamed
    with pytest.raises(UserError, match="does not exist"):
        stream.check()  # train/ and test/ are missing


def test_image_folder_needs_class_folders(tmp_path):
    folder = tmp_path / "images"
    with pytest.raises(UserError, match="is not a directory"):
        images(str(folder), str(folder), size=(8, 8))
    folder.mkdir()
    with pytest.raises(UserError, match="no sub-folders"):
        images(str(folder), str(folder), size=(8, 8))
    (folder / "cat").mkdir()
    (folder / "dog").mkdir()
    assert images(str(folder), str(folder), size=(8, 8)).source.endswith("(2 classes)")


def test_a_streamed_trial_leaves_a_cpu_to_ray_data():
    mwms, none = get_strategy("tf:mwms"), get_strategy("torch:none")
    two_cpus = {"CPU": 2.0}
    assert reservation(mwms, mwms.layout(2, 1), two_cpus) == (1, False)
    assert reservation(mwms, mwms.layout(2, 1), two_cpus, streamed=True) == (0.5, True)
    assert reservation(none, none.layout(1, 1), two_cpus, streamed=True) == (1, False)
    assert reservation(none, none.layout(1, 2), two_cpus, streamed=True) == (1, True)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--trials", "tf:ps", "--data", "{dir}"], "tf:ps reads in-memory data only"),
        (["--trials", "torch:none", "--plain", "--data", "{dir}"], "--plain runs plain scripts on in-memory"),
        (["--trials", "torch:none", "--data", "{dir}/absent"], "no such directory"),
    ],
)
def test_what_cannot_stream_exits_2_with_one_line_before_ray(no_ray, tmp_path, argv, message, capsys):  # noqa: F811
    import pandas as pd

    data = tmp_path / "exported"
    for split in ("train", "test"):
        (data / split).mkdir(parents=True)
        pd.DataFrame({"x": [0.5, 1.0], "y": [0, 1]}).to_parquet(data / split / "part-00000.parquet")
    (data / MANIFEST).write_text(json.dumps({"name": "n", "inputs": "x", "targets": "y"}))
    assert cli.recipe_main(RECIPE, [a.format(dir=data) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_export_writes_parquet_shards_ray_data_reads_as_tensors(tmp_path):
    import pyarrow.parquet as pq

    from raylab.cli.data import export
    from raylab.data import Dataset

    ds = Dataset(
        "tiny",
        np.arange(5 * 6, dtype=np.uint8).reshape(5, 2, 3),
        {"a": np.arange(5), "b": np.ones(5)},
        np.zeros((2, 2, 3), np.uint8),
        {"a": np.arange(2), "b": np.ones(2)},
        source="arrays",
    )
    manifest = export(ds, tmp_path / "out", rows_per_file=2)
    assert manifest["targets"] == ["a", "b"] or manifest["targets"] == ("a", "b")
    files = sorted((tmp_path / "out" / "train").glob("*.parquet"))
    assert len(files) == 3  # 5 rows, 2 per file
    table = pq.read_table(files[0])
    assert table.num_rows == 2 and set(table.column_names) == {"x", "a", "b"}
    assert json.loads((tmp_path / "out" / MANIFEST).read_text())["train_items"] == 5
    with pytest.raises(UserError, match="not empty"):
        export(ds, tmp_path / "out")


def test_parquet_as_pandas_writes_it_is_checked_before_ray_starts(tmp_path):
    import pandas as pd

    for split in ("train", "test"):
        (tmp_path / split).mkdir()
        pd.DataFrame({"features": list(np.zeros((4, 3), np.float32)), "label": np.arange(4)}).to_parquet(
            tmp_path / split / "part-0.parquet"
        )
    good = parquet(train=str(tmp_path / "train"), test=str(tmp_path / "test"), inputs="features", targets="label")
    good.check()
    with pytest.raises(UserError, match="has no column 'feats'"):
        parquet(train=str(tmp_path / "train"), test=str(tmp_path / "test"), inputs="feats", targets="label").check()
    pd.DataFrame({"features": [np.zeros(3), np.zeros(2)], "label": [0, 1]}).to_parquet(
        tmp_path / "test" / "part-0.parquet"
    )
    with pytest.raises(UserError, match="part-0.parquet: column 'features': rows hold lists of different lengths"):
        good.check()
