"""raylab.data: MNIST (with its Fashion-MNIST fallback) and CIFAR-10 (python, binary, synthetic)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from raylab import data
from raylab.data import Dataset, cifar10, mnist
from raylab.errors import UserError
from tests.unit.conftest import write_idx

SYSTEM = Path("/usr/share/datasets")
CIFAR_NAMES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
# (batch index, image in batch, channel, row, column, value): one marked pixel per batch and channel.
MARKS = [(b, 7 + b, b % 3, 5 + b, 9 + 2 * b, 200 + b) for b in range(6)]


@pytest.fixture(autouse=True)
def no_system_datasets(monkeypatch):
    """Whatever this machine has under /usr/share/datasets stays out of these tests."""
    real = data.data_search_path
    monkeypatch.setattr(
        data.readers, "data_search_path", lambda subdir: [p for p in real(subdir) if SYSTEM not in p.parents]
    )


# --- MNIST ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory) -> Path:
    """A RAYLAB_DATA_DIR holding real-sized fake MNIST, told apart from the Fashion fixture by its pixels."""
    root = tmp_path_factory.mktemp("mnist")
    d = root / "mnist"
    write_idx(d / "train-images-idx3-ubyte", np.full((60000, 28, 28), 3, np.uint8))
    write_idx(d / "train-labels-idx1-ubyte.gz", (np.arange(60000) + 1) % 10)
    write_idx(d / "t10k-images-idx3-ubyte.gz", np.full((10000, 28, 28), 4, np.uint8))
    write_idx(d / "t10k-labels-idx1-ubyte", (np.arange(10000) + 2) % 10)
    return root


def test_mnist_reads_and_validates(mnist_root, monkeypatch):
    """mnist() reads the four IDX files under <data dir>/mnist, plain or gzipped, with no note."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(mnist_root))
    ds = mnist()
    assert (ds.x_train.shape, ds.y_train.shape, ds.x_test.shape, ds.y_test.shape) == (
        (60000, 28, 28),
        (60000,),
        (10000, 28, 28),
        (10000,),
    )
    assert ds.x_train.dtype == np.uint8 and ds.x_train[0, 0, 0] == 3 and ds.x_test.max() == 4
    assert ds.y_train[:3].tolist() == [1, 2, 3] and ds.y_test[:3].tolist() == [2, 3, 4]
    assert (ds.name, ds.source, ds.synthetic, ds.note) == ("mnist", str(mnist_root / "mnist"), False, "")


def test_mnist_absent_falls_back_to_fashion_with_a_note(fashion_root, monkeypatch):
    """With no MNIST anywhere on the search path, mnist() returns Fashion-MNIST and says so."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    ds = mnist()
    assert ds.name == "fashion-mnist" and ds.source == str(fashion_root / "fashion-mnist")
    assert ds.x_test.max() == 7 and ds.x_train.shape == (60000, 28, 28)
    assert "MNIST digits not found" in ds.note and "Fashion-MNIST instead" in ds.note
    assert str(fashion_root / "mnist") in ds.note
    assert ds.subset(10, 5).note == ds.note


def test_mnist_absent_and_fashion_absent_is_a_user_error(tmp_path, monkeypatch):
    """No MNIST and no Fashion-MNIST: the Fashion-MNIST not-found error, naming where to put it."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "empty"))
    with pytest.raises(UserError, match="fashion-mnist data not found"):
        mnist()


def test_mnist_present_but_corrupt_is_a_user_error(mnist_root, fashion_root, tmp_path, monkeypatch):
    """A corrupt MNIST file is a UserError naming it, never a silent Fashion-MNIST fallback."""
    d = tmp_path / "data" / "mnist"
    d.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        (d / name).symlink_to(mnist_root / "mnist" / name)
    bad = write_idx(d / "t10k-labels-idx1-ubyte", np.zeros(10000))
    bad.write_bytes(bad.read_bytes()[:-10])
    (tmp_path / "data" / "fashion-mnist").symlink_to(fashion_root / "fashion-mnist")
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError, match="truncated or padded") as e:
        mnist()
    assert str(bad) in str(e.value)


# --- CIFAR-10 ---------------------------------------------------------------------------


def _cifar_batches():
    """Six (10000 x 3072 uint8 channel-major images, labels) batches, zero but for the MARKS."""
    batches = []
    for b in range(6):
        images = np.zeros((10000, 3072), np.uint8)
        labels = (np.arange(10000) + b) % 10
        batches.append((images, labels))
    for b, i, c, r, col, v in MARKS:
        batches[b][0][i, c * 1024 + r * 32 + col] = v
    return batches


@pytest.fixture(scope="module")
def cifar_py_root(tmp_path_factory) -> Path:
    """A data dir with the python batches where the archive unpacks them: cifar-10/cifar-10-batches-py."""
    root = tmp_path_factory.mktemp("cifar-py")
    d = root / "cifar-10" / "cifar-10-batches-py"
    d.mkdir(parents=True)
    for name, (images, labels) in zip(CIFAR_NAMES, _cifar_batches()):
        with open(d / name, "wb") as f:
            pickle.dump({b"batch_label": name.encode(), b"labels": labels.tolist(), b"data": images}, f)
    return root


@pytest.fixture(scope="module")
def cifar_bin_root(tmp_path_factory) -> Path:
    """A data dir with the binary batches in cifar-10-batches-bin directly under it."""
    root = tmp_path_factory.mktemp("cifar-bin")
    d = root / "cifar-10-batches-bin"
    d.mkdir(parents=True)
    for name, (images, labels) in zip(CIFAR_NAMES, _cifar_batches()):
        (d / f"{name}.bin").write_bytes(np.hstack([labels.astype(np.uint8)[:, None], images]).tobytes())
    return root


def _check_cifar(ds: Dataset):
    """Shapes, NHWC placement of every marked pixel, and labels in file order."""
    assert (ds.x_train.shape, ds.y_train.shape, ds.x_test.shape, ds.y_test.shape) == (
        (50000, 32, 32, 3),
        (50000,),
        (10000, 32, 32, 3),
        (10000,),
    )
    assert ds.x_train.dtype == ds.y_train.dtype == ds.x_test.dtype == ds.y_test.dtype == np.uint8
    assert ds.x_train.flags.c_contiguous and ds.x_test.flags.c_contiguous
    for b, i, c, r, col, v in MARKS:
        x, n = (ds.x_test, i) if b == 5 else (ds.x_train, b * 10000 + i)
        assert x[n, r, col, c] == v
    assert int(ds.x_train.sum()) == sum(v for b, *_, v in MARKS if b < 5) and int(ds.x_test.sum()) == MARKS[5][-1]
    assert ds.y_train[:3].tolist() == [0, 1, 2] and ds.y_train[10000:10003].tolist() == [1, 2, 3]
    assert ds.y_test[:3].tolist() == [5, 6, 7]
    assert (ds.name, ds.synthetic, ds.note) == ("cifar-10", False, "")


def test_cifar10_python_batches(cifar_py_root, monkeypatch):
    """Pickled batches under <data dir>/cifar-10/cifar-10-batches-py read back as NHWC uint8."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(cifar_py_root))
    ds = cifar10()
    _check_cifar(ds)
    assert ds.source == str(cifar_py_root / "cifar-10" / "cifar-10-batches-py")


def test_cifar10_binary_batches(cifar_bin_root, monkeypatch):
    """Binary batches in <data dir>/cifar-10-batches-bin read back exactly like the python ones."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(cifar_bin_root))
    ds = cifar10()
    _check_cifar(ds)
    assert ds.source == str(cifar_bin_root / "cifar-10-batches-bin")


def test_cifar10_found_where_keras_unpacks_it(cifar_py_root, tmp_path):
    """Without RAYLAB_DATA_DIR, ~/.keras/datasets/cifar-10-batches-py (Keras's own location) is found."""
    keras = tmp_path / "home" / ".keras" / "datasets"
    keras.mkdir(parents=True)
    (keras / "cifar-10-batches-py").symlink_to(cifar_py_root / "cifar-10" / "cifar-10-batches-py")
    assert cifar10().source == str(keras / "cifar-10-batches-py")


def _binary_with_first_batch(cifar_bin_root, tmp_path, monkeypatch, content: bytes) -> Path:
    """A data dir sharing the other good binary batches but with this data_batch_1.bin (read first)."""
    d = tmp_path / "data" / "cifar-10"
    d.mkdir(parents=True)
    for name in CIFAR_NAMES[1:]:
        (d / f"{name}.bin").symlink_to(cifar_bin_root / "cifar-10-batches-bin" / f"{name}.bin")
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "data"))
    (d / "data_batch_1.bin").write_bytes(content)
    return d / "data_batch_1.bin"


@pytest.mark.parametrize(
    "edit, words",
    [
        pytest.param(lambda raw: raw[:-5], "not a whole number of 3073-byte records", id="truncated"),
        pytest.param(lambda raw: raw[:-3073], "holds 9999 images, expected 10000", id="record-missing"),
        pytest.param(lambda raw: b"\x0a" + raw[1:], "label 10, outside 0..9", id="label-10"),
    ],
)
def test_cifar10_bad_binary_batch_is_a_user_error(cifar_bin_root, tmp_path, monkeypatch, edit, words):
    """A binary batch cut short, a record short or with a label above 9 is a UserError naming the file."""
    good = (cifar_bin_root / "cifar-10-batches-bin" / "data_batch_1.bin").read_bytes()
    bad = _binary_with_first_batch(cifar_bin_root, tmp_path, monkeypatch, edit(good))
    with pytest.raises(UserError, match=words) as e:
        cifar10()
    assert str(bad) in str(e.value) and "re-install" in str(e.value)


def test_cifar10_corrupt_pickle_is_a_user_error(cifar_py_root, tmp_path, monkeypatch):
    """A python batch that is not a pickle is a UserError naming the file."""
    d = tmp_path / "data" / "cifar-10"
    d.mkdir(parents=True)
    for name in CIFAR_NAMES[1:]:
        (d / name).symlink_to(cifar_py_root / "cifar-10" / "cifar-10-batches-py" / name)
    (d / "data_batch_1").write_bytes(b"<html>not found</html>")
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError, match="not a readable pickle") as e:
        cifar10()
    assert str(d / "data_batch_1") in str(e.value)


def test_cifar10_partial_install_is_a_user_error(cifar_py_root, tmp_path, monkeypatch):
    """Some batches but not all is a UserError naming the directory and the missing files, not synthetic data."""
    d = tmp_path / "data" / "cifar-10"
    d.mkdir(parents=True)
    for name in CIFAR_NAMES[:4]:
        (d / name).symlink_to(cifar_py_root / "cifar-10" / "cifar-10-batches-py" / name)
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError, match="missing data_batch_5, test_batch") as e:
        cifar10()
    assert str(d) in str(e.value)


def test_cifar10_absent_is_deterministic_synthetic(tmp_path, monkeypatch):
    """No CIFAR-10 anywhere: seeded synthetic data of CIFAR-10's shapes, flagged, with a note on where files go."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(tmp_path / "empty"))
    ds = cifar10()
    assert (ds.x_train.shape, ds.y_train.shape, ds.x_test.shape, ds.y_test.shape) == (
        (50000, 32, 32, 3),
        (50000,),
        (10000, 32, 32, 3),
        (10000,),
    )
    assert ds.x_train.dtype == ds.y_train.dtype == np.uint8
    assert set(np.unique(ds.y_train).tolist()) == set(range(10)) and ds.x_train.max() == 255
    assert ds.synthetic and ds.name == "cifar-10-synthetic"
    assert ds.source.startswith("synthetic (no CIFAR-10 files in ")
    assert str(tmp_path / "empty" / "cifar-10") in ds.source
    assert "data_batch_1" in ds.note and "test_batch" in ds.note and str(tmp_path / "empty") in ds.note
    again = cifar10()
    for k in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(ds, k), getattr(again, k))
    assert not np.array_equal(ds.x_train[:10000], ds.x_test)
