"""Streamed data without a cluster: the batch source's passes and restarts, the sources' checks, the CPU left
to Ray Data, the export's files, and the mistakes refused before Ray starts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from raylab import cli
from raylab.data.stream import MANIFEST, StreamInfo, images, parquet
from raylab.driver.resources import reservation
from raylab.errors import UserError
from raylab.loop import StreamBatches
from raylab.registry import get_strategy
from tests.unit.test_config import RECIPE, no_ray  # noqa: F401 - a fixture, used by name


def numbered_passes(sizes: list[int]):
    """epoch() for a StreamBatches: pass p yields (p, 0), (p, 1), ... (what a Ray Data split's pass does)."""
    passes = iter(range(100))

    def epoch():
        p = next(passes)
        return ((p, i) for i in range(sizes[min(p, len(sizes) - 1)]))

    return epoch


def test_a_new_pass_starts_every_steps_per_epoch_batches():
    source = StreamBatches(numbered_passes([5]), steps_per_epoch=3)
    assert [source.next() for _ in range(7)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert source.figures() == {"stream_skipped_batches": 0, "stream_passes": 3}
    assert source.wait_s >= 0


def test_restart_reads_past_the_batches_its_epoch_had_trained_on():
    source = StreamBatches(numbered_passes([5]), steps_per_epoch=4)
    source.restart(6)  # a checkpoint 2 steps into the second epoch
    assert source.next() == (0, 2) and source.figures()["stream_skipped_batches"] == 2
    assert [source.next() for _ in range(2)] == [(0, 3), (1, 0)]
    source.restart(8)  # at an epoch's end: nothing to skip
    assert source.next() == (2, 0) and source.figures()["stream_skipped_batches"] == 2


def test_an_epoch_longer_than_a_pass_goes_on_into_the_next_pass():
    source = StreamBatches(numbered_passes([2]), steps_per_epoch=3)
    assert [source.next() for _ in range(4)] == [(0, 0), (0, 1), (1, 0), (2, 0)]
    empty = StreamBatches(numbered_passes([0]), steps_per_epoch=3)
    with pytest.raises(RuntimeError, match="split is empty"):
        empty.next()


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
    (tmp_path / MANIFEST).write_text(json.dumps({"name": "n", "inputs": ["a", "b"], "targets": "y",
                                                 "train_items": 4, "test_items": 2}))
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


@pytest.mark.parametrize("argv,message", [
    (["--trials", "tf:ps", "--data", "{dir}"], "tf:ps reads in-memory data only"),
    (["--trials", "torch:none", "--baseline", "--data", "{dir}"], "--baseline runs plain scripts on in-memory"),
    (["--trials", "torch:none", "--data", "{dir}/absent"], "no such directory"),
])
def test_what_cannot_stream_exits_2_with_one_line_before_ray(no_ray, tmp_path, argv, message, capsys):  # noqa: F811
    data = tmp_path / "exported"
    for split in ("train", "test"):
        (data / split).mkdir(parents=True)
    (data / MANIFEST).write_text(json.dumps({"name": "n", "inputs": "x", "targets": "y"}))
    assert cli.recipe_main(RECIPE, [a.format(dir=data) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_export_writes_parquet_shards_ray_data_reads_as_tensors(tmp_path):
    import pyarrow.parquet as pq

    from raylab.cli.data import export
    from raylab.data import Dataset

    ds = Dataset("tiny", np.arange(5 * 6, dtype=np.uint8).reshape(5, 2, 3), {"a": np.arange(5), "b": np.ones(5)},
                 np.zeros((2, 2, 3), np.uint8), {"a": np.arange(2), "b": np.ones(2)}, source="arrays")
    manifest = export(ds, tmp_path / "out", rows_per_file=2)
    assert manifest["targets"] == ["a", "b"] or manifest["targets"] == ("a", "b")
    files = sorted((tmp_path / "out" / "train").glob("*.parquet"))
    assert len(files) == 3  # 5 rows, 2 per file
    table = pq.read_table(files[0])
    assert table.num_rows == 2 and set(table.column_names) == {"x", "a", "b"}
    assert json.loads((tmp_path / "out" / MANIFEST).read_text())["train_items"] == 5
    with pytest.raises(UserError, match="not empty"):
        export(ds, tmp_path / "out")
