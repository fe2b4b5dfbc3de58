"""raylab.data: the IDX reader, the data search path, Fashion-MNIST loading, sharding."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from raylab import data
from raylab.data import FASHION_FILES, Dataset, fashion_mnist, find_idx_files, read_idx, shard_indices
from raylab.errors import UserError

IMAGES = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)


def _raw(array) -> bytes:
    """The bytes of an unsigned-byte IDX file holding `array`."""
    array = np.asarray(array, np.uint8)
    return struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_idx(path, array):
    """Writes an IDX file, gzipped if the name ends in .gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(_raw(array)) if path.suffix == ".gz" else _raw(array))
    return path


# --- read_idx ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_read_idx_round_trips_plain_and_gzipped(tmp_path, name):
    """A valid IDX file, plain or gzipped, reads back as the same uint8 array."""
    path = write_idx(tmp_path / name, IMAGES)
    out = read_idx(path, 3, count=2, shape=(3, 4))
    assert out.dtype == np.uint8 and out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, IMAGES)


def test_read_idx_one_dimensional_labels(tmp_path):
    """A 1-D labels file with an empty item shape reads back."""
    path = write_idx(tmp_path / "labels.gz", [3, 1, 4, 1, 5])
    np.testing.assert_array_equal(read_idx(path, 1, count=5, shape=()), [3, 1, 4, 1, 5])


@pytest.mark.parametrize(
    "content, kwargs, words",
    [
        pytest.param(b"\x00\x00\x0d\x03" + _raw(IMAGES)[4:], {}, "wrong IDX magic", id="float-type-code"),
        pytest.param(_raw(np.zeros(20)), {}, "wrong IDX magic", id="1-d-file-read-as-images"),
        pytest.param(_raw(IMAGES)[:10], {}, "no complete IDX header", id="header-cut-short"),
        pytest.param(_raw(IMAGES)[:-1], {}, "truncated or padded", id="body-one-byte-short"),
        pytest.param(_raw(IMAGES) + b"\x00", {}, "truncated or padded", id="body-one-byte-long"),
        pytest.param(_raw(IMAGES), {"count": 3}, "holds 2 items, expected 3", id="wrong-count"),
        pytest.param(_raw(IMAGES), {"shape": (28, 28)}, "shape (3, 4), expected (28, 28)", id="wrong-shape"),
    ],
)
def test_read_idx_rejects_bad_files_naming_the_path(tmp_path, content, kwargs, words):
    """Every malformed IDX file is a UserError that names the file and the problem."""
    path = tmp_path / "bad-idx3-ubyte"
    path.write_bytes(content)
    with pytest.raises(UserError) as e:
        read_idx(path, 3, **kwargs)
    assert str(path) in str(e.value) and words in str(e.value)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"this is not gzip at all", id="not-gzip"),
        pytest.param(gzip.compress(_raw(IMAGES) * 50)[:40], id="stream-cut-short"),
        pytest.param(gzip.compress(_raw(IMAGES), mtime=0)[:-8] + b"\0" * 8, id="bad-crc"),
    ],
)
def test_read_idx_corrupt_gzip_is_a_user_error(tmp_path, content):
    """A .gz file that is not gzip, cut short or fails its CRC is a UserError naming the file."""
    path = tmp_path / "bad-idx3-ubyte.gz"
    path.write_bytes(content)
    with pytest.raises(UserError, match="not a readable IDX file") as e:
        read_idx(path, 3)
    assert str(path) in str(e.value)


def test_read_idx_corrupt_deflate_stream_is_a_user_error(tmp_path):
    """A .gz file with a valid gzip header but garbage compressed data is a UserError naming the file."""
    good = gzip.compress(_raw(IMAGES), mtime=0)
    path = tmp_path / "bad-idx3-ubyte.gz"
    path.write_bytes(good[:10] + b"\xff" * (len(good) - 10))  # header kept, deflate block type 3 (invalid)
    with pytest.raises(UserError) as e:
        read_idx(path, 3)
    assert str(path) in str(e.value)


# --- search path and find_idx_files -------------------------------------------------------


def test_search_path_order(tmp_path, monkeypatch):
    """RAYLAB_DATA_DIR/<subdir>, then RAYLAB_DATA_DIR, then ~/.keras/datasets, then /usr/share/datasets."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "d"))
    assert data.data_search_path("fm") == [
        tmp_path / "d" / "fm",
        tmp_path / "d",
        tmp_path / "home" / ".keras" / "datasets" / "fm",
        data.readers.Path("/usr/share/datasets/fm"),
    ]
    monkeypatch.delenv("RAYLAB_DATA_DIR")
    assert data.data_search_path("fm")[0] == tmp_path / "home" / ".keras" / "datasets" / "fm"


TOY = {"a": "a-idx1-ubyte", "b": "b-idx1-ubyte"}


def _touch(directory, *names):
    directory.mkdir(parents=True, exist_ok=True)
    for n in names:
        (directory / n).write_bytes(b"")


def test_find_idx_files_first_complete_directory_wins(tmp_path, monkeypatch):
    """The first directory holding every file wins; an incomplete one earlier on the path is skipped."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "d"))
    _touch(tmp_path / "d" / "toy", "a-idx1-ubyte.gz")  # incomplete: no b
    _touch(tmp_path / "d", "a-idx1-ubyte", "b-idx1-ubyte.gz")  # complete
    _touch(tmp_path / "home" / ".keras" / "datasets" / "toy", "a-idx1-ubyte", "b-idx1-ubyte")  # also complete
    found = find_idx_files("toy", TOY)
    assert found == {"a": tmp_path / "d" / "a-idx1-ubyte", "b": tmp_path / "d" / "b-idx1-ubyte.gz"}


def test_find_idx_files_prefers_gz_and_falls_back_to_keras(tmp_path):
    """Without RAYLAB_DATA_DIR, ~/.keras/datasets/<subdir> is used and .gz wins over plain."""
    keras = tmp_path / "home" / ".keras" / "datasets" / "toy"
    _touch(keras, "a-idx1-ubyte", "a-idx1-ubyte.gz", "b-idx1-ubyte")
    assert find_idx_files("toy", TOY) == {"a": keras / "a-idx1-ubyte.gz", "b": keras / "b-idx1-ubyte"}


def test_not_found_names_the_four_files_and_where(tmp_path, monkeypatch):
    """Missing Fashion-MNIST is a UserError naming all four files and every place looked in."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(data.readers, "data_search_path", lambda subdir: [empty / subdir, empty])
    with pytest.raises(UserError) as e:
        fashion_mnist()
    msg = str(e.value)
    assert all(f"{stem}.gz" in msg for stem in FASHION_FILES.values())
    assert str(empty / "fashion-mnist") in msg and "not found" in msg


# --- fashion_mnist ----------------------------------------------------------------------


def test_fashion_mnist_reads_and_validates(fashion_root, monkeypatch):
    """fashion_mnist() finds the files via RAYLAB_DATA_DIR and returns validated uint8 arrays."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    ds = fashion_mnist()
    assert (ds.x_train.shape, ds.y_train.shape, ds.x_test.shape, ds.y_test.shape) == (
        (60000, 28, 28),
        (60000,),
        (10000, 28, 28),
        (10000,),
    )
    assert ds.x_train.dtype == np.uint8 and ds.y_test[:3].tolist() == [0, 1, 2] and ds.x_test.max() == 7
    assert ds.name == "fashion-mnist" and ds.source == str(fashion_root / "fashion-mnist") and not ds.synthetic


def _fashion_with_test_labels(fashion_root, tmp_path, monkeypatch, labels):
    """A data dir sharing the good files of `fashion_root` but with these test labels."""
    d = tmp_path / "fm" / "fashion-mnist"
    d.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte"):
        (d / name).symlink_to(fashion_root / "fashion-mnist" / name)
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "fm"))
    return write_idx(d / "t10k-labels-idx1-ubyte.gz", labels)


def test_fashion_mnist_label_out_of_range(fashion_root, tmp_path, monkeypatch):
    """A label above 9 is a UserError naming the labels file and the label."""
    labels = np.arange(10000) % 10
    labels[123] = 10
    bad = _fashion_with_test_labels(fashion_root, tmp_path, monkeypatch, labels)
    with pytest.raises(UserError, match="label 10, outside 0..9") as e:
        fashion_mnist()
    assert str(bad) in str(e.value)


def test_fashion_mnist_wrong_count(fashion_root, tmp_path, monkeypatch):
    """A labels file with the wrong number of items is a UserError naming it and both counts."""
    bad = _fashion_with_test_labels(fashion_root, tmp_path, monkeypatch, np.zeros(9999))
    with pytest.raises(UserError, match="holds 9999 items, expected 10000") as e:
        fashion_mnist()
    assert str(bad) in str(e.value)


# --- sharding and subsets ---------------------------------------------------------------


@pytest.mark.parametrize("n, world", [(103, 4), (100, 3), (8, 8), (10, 1)])
def test_shards_disjoint_equal_and_covering(n, world):
    """Shards are disjoint, equally long, sorted, and together cover n - n % world distinct items."""
    shards = [shard_indices(n, world, r, seed=7) for r in range(world)]
    assert {len(s) for s in shards} == {n // world}
    union = np.concatenate(shards)
    assert len(set(union.tolist())) == len(union) == n - n % world
    assert union.min() >= 0 and union.max() < n
    assert all((np.diff(s) > 0).all() for s in shards)


def test_shards_deterministic_per_seed():
    """The same seed gives the same shard; another seed gives a different one."""
    np.testing.assert_array_equal(shard_indices(1000, 2, 1, seed=3), shard_indices(1000, 2, 1, seed=3))
    assert not np.array_equal(shard_indices(1000, 2, 1, seed=3), shard_indices(1000, 2, 1, seed=4))


def test_dataset_subset():
    """subset() keeps the first n items of each split and the name, source and synthetic flag."""
    ds = Dataset("toy", np.arange(10), np.arange(10) % 2, np.arange(5), np.arange(5) % 2, "/src", synthetic=True)
    sub = ds.subset(4, 2)
    assert sub.x_train.tolist() == [0, 1, 2, 3] and sub.y_train.tolist() == [0, 1, 0, 1]
    assert sub.x_test.tolist() == [0, 1] and sub.y_test.tolist() == [0, 1]
    assert (sub.name, sub.source, sub.synthetic) == ("toy", "/src", True)
    assert len(ds.x_train) == 10  # the original is untouched
