"""The datasets raylab reads itself: Fashion-MNIST and MNIST (IDX files), CIFAR-10 (the python or binary batches),
found on the data search path, validated, and in their place a seeded synthetic set where they are absent."""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from raylab.data.dataset import Dataset
from raylab.errors import UserError

FASHION_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
FASHION_COUNTS = {"x_train": 60000, "y_train": 60000, "x_test": 10000, "y_test": 10000}

# IDX magic: two zero bytes, a type code (0x08 = unsigned byte) and the number of dimensions.
_IDX_UBYTE = 0x08


def data_search_path(subdir: str) -> list[Path]:
    """Where datasets are looked for, first match wins."""
    path = []
    if os.environ.get("RAYLAB_DATA_DIR"):
        root = Path(os.environ["RAYLAB_DATA_DIR"]).expanduser()
        path += [root / subdir, root]
    path += [Path("~/.keras/datasets").expanduser() / subdir, Path("/usr/share/datasets") / subdir]
    return path


def read_idx(path: Path, ndim: int, count: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """Reads one IDX file (gzipped or plain) of unsigned bytes, checking its header and size."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path} is not a readable IDX file ({e}); re-install the dataset.") from e
    if len(raw) < 4 + 4 * ndim:
        raise UserError(f"{path} is truncated ({len(raw)} bytes, no complete IDX header); re-install the dataset.")
    zero, dtype, dims = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype != _IDX_UBYTE or dims != ndim:
        raise UserError(
            f"{path} has a wrong IDX magic number (0x{raw[:4].hex()}, expected 0x0000{_IDX_UBYTE:02x}{ndim:02x}); "
            "it is not this dataset's file or it is corrupt."
        )
    header = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    if count is not None and header[0] != count:
        raise UserError(f"{path} holds {header[0]} items, expected {count}; re-install the dataset.")
    if shape is not None and tuple(header[1:]) != shape:
        raise UserError(f"{path} has items of shape {tuple(header[1:])}, expected {shape}.")
    body = raw[4 + 4 * ndim :]
    expected = int(np.prod(header))
    if len(body) != expected:
        raise UserError(
            f"{path} is truncated or padded: {len(body)} data bytes, expected {expected}; re-install the dataset."
        )
    return np.frombuffer(body, dtype=np.uint8).reshape(header)


def _locate_idx_files(subdir: str, files: dict[str, str]) -> dict[str, Path] | None:
    """The first directory on the search path that holds all files (plain or .gz), or None."""
    for directory in data_search_path(subdir):
        found = {}
        for key, stem in files.items():
            for name in (stem + ".gz", stem):
                if (directory / name).is_file():
                    found[key] = directory / name
                    break
        if len(found) == len(files):
            return found
    return None


def find_idx_files(subdir: str, files: dict[str, str]) -> dict[str, Path]:
    """The first directory on the search path that holds all files (plain or .gz)."""
    found = _locate_idx_files(subdir, files)
    if found is not None:
        return found
    names = ", ".join(f"{stem}.gz" for stem in files.values())
    where = ", ".join(str(p) for p in data_search_path(subdir))
    raise UserError(
        f"{subdir} data not found: put {names} (gzipped or plain) in one of {where}, "
        "or install Debian's dataset-fashion-mnist (scripts/setup.sh does)."
    )


def _load_idx_set(subdir: str, name: str) -> Dataset:
    """A 28x28, 10-class dataset in the four MNIST-style IDX files found under `subdir`, validated."""
    paths = find_idx_files(subdir, FASHION_FILES)
    arrays = {}
    for key, path in paths.items():
        is_images = key.startswith("x")
        arrays[key] = read_idx(path, 3 if is_images else 1, FASHION_COUNTS[key], (28, 28) if is_images else ())
    for key in ("y_train", "y_test"):
        if arrays[key].max() > 9:
            raise UserError(f"{paths[key]} has label {arrays[key].max()}, outside 0..9; the file is corrupt.")
    return Dataset(name, **arrays, source=str(paths["x_train"].parent))


def fashion_mnist() -> Dataset:
    """Fashion-MNIST from the original IDX files, validated."""
    return _load_idx_set("fashion-mnist", "fashion-mnist")


def mnist() -> Dataset:
    """MNIST digits from the original IDX files (same names as Fashion-MNIST's), validated.

    Falls back to Fashion-MNIST, with a `note` saying so, only when no directory on the search
    path holds all four MNIST files; a present but corrupt file is still a UserError.
    """
    if _locate_idx_files("mnist", FASHION_FILES) is not None:
        return _load_idx_set("mnist", "mnist")
    ds = fashion_mnist()
    where = ", ".join(str(p) for p in data_search_path("mnist"))
    names = ", ".join(f"{stem}.gz" for stem in FASHION_FILES.values())
    ds.note = f"MNIST digits not found in {where} (put {names} there); ran on Fashion-MNIST instead."
    return ds


CIFAR_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST_BATCH = "test_batch"
CIFAR_BATCH_ITEMS = 10000
_CIFAR_PIXELS = 3 * 32 * 32  # channel-major: 1024 R, 1024 G, 1024 B, each a row-major 32x32 plane
_CIFAR_ARCHIVE_DIRS = ("cifar-10-batches-py", "cifar-10-batches-bin")  # what the official archives unpack to


def _cifar_dirs() -> list[Path]:
    """Directories that may hold CIFAR-10 batches, in search-path order, without duplicates."""
    dirs = []
    for d in data_search_path("cifar-10"):
        dirs += [d] + [d / a for a in _CIFAR_ARCHIVE_DIRS]
        if d.name == "cifar-10":  # the archives' directories directly on ~/.keras/datasets etc.
            dirs += [d.parent / a for a in _CIFAR_ARCHIVE_DIRS]
    return list(dict.fromkeys(dirs))


def _cifar_batch_error(path: Path, problem: str) -> UserError:
    return UserError(f"{path} {problem}; it is not a CIFAR-10 batch or it is corrupt, re-install CIFAR-10.")


def _read_cifar_python(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR-10 batch: (N x 3072 uint8 channel-major images, N labels)."""
    import pickle  # the files come from the data path only, never from a user-supplied URL

    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
    except Exception as e:  # a corrupt pickle can raise nearly anything
        raise _cifar_batch_error(path, f"is not a readable pickle ({type(e).__name__}: {e})") from e
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise _cifar_batch_error(path, "has no b'data' and b'labels' entries")
    images, labels = batch[b"data"], batch[b"labels"]
    shape, dtype = getattr(images, "shape", None), getattr(images, "dtype", None)
    if not isinstance(images, np.ndarray) or dtype != np.uint8 or images.ndim != 2 or shape[1] != _CIFAR_PIXELS:
        raise _cifar_batch_error(path, f"has data of shape {shape} dtype {dtype}, expected (N, {_CIFAR_PIXELS}) uint8")
    try:
        labels = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as e:
        raise _cifar_batch_error(path, f"has non-integer labels ({e})") from e
    if labels.shape != (len(images),):
        raise _cifar_batch_error(path, f"has {labels.size} labels for {len(images)} images")
    return images, labels


def _read_cifar_binary(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One binary CIFAR-10 batch: records of 1 label byte + 3072 channel-major image bytes."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise _cifar_batch_error(path, f"is not readable ({e})") from e
    record = 1 + _CIFAR_PIXELS
    if len(raw) % record:
        raise _cifar_batch_error(path, f"is {len(raw)} bytes, not a whole number of {record}-byte records")
    records = np.frombuffer(raw, dtype=np.uint8).reshape(-1, record)
    return records[:, 1:], records[:, 0]


def _read_cifar_batches(directory: Path, names: tuple[str, ...], reader) -> tuple[np.ndarray, np.ndarray]:
    """The batches concatenated and validated: (N, 32, 32, 3) uint8 NHWC images, (N,) uint8 labels."""
    images, labels = [], []
    for name in names:
        path = directory / name
        x, y = reader(path)
        if len(x) != CIFAR_BATCH_ITEMS:
            raise _cifar_batch_error(path, f"holds {len(x)} images, expected {CIFAR_BATCH_ITEMS}")
        if len(y) and (y.min() < 0 or y.max() > 9):
            bad = y.max() if y.max() > 9 else y.min()
            raise _cifar_batch_error(path, f"has label {bad}, outside 0..9")
        images.append(x)
        labels.append(y)
    nchw = np.concatenate(images).reshape(-1, 3, 32, 32)
    return np.ascontiguousarray(nchw.transpose(0, 2, 3, 1)), np.concatenate(labels).astype(np.uint8)


def cifar10() -> Dataset:
    """CIFAR-10 (python or binary batches) from the data path, validated; synthetic if absent.

    A directory holding only some of the six batches is a UserError, so a broken install never
    silently turns into a synthetic run.
    """
    python_names = CIFAR_TRAIN_BATCHES + (CIFAR_TEST_BATCH,)
    formats = ((python_names, _read_cifar_python), (tuple(n + ".bin" for n in python_names), _read_cifar_binary))
    partial = None
    for directory in _cifar_dirs():
        for names, reader in formats:
            present = [n for n in names if (directory / n).is_file()]
            if len(present) == len(names):
                x_train, y_train = _read_cifar_batches(directory, names[:-1], reader)
                x_test, y_test = _read_cifar_batches(directory, names[-1:], reader)
                return Dataset("cifar-10", x_train, y_train, x_test, y_test, source=str(directory))
            if present and partial is None:
                partial = (directory, [n for n in names if n not in present])
    if partial is not None:
        directory, missing = partial
        raise UserError(
            f"{directory} holds only part of CIFAR-10 (missing {', '.join(missing)}); re-install CIFAR-10 there."
        )
    where = ", ".join(str(d) for d in data_search_path("cifar-10"))
    rng = np.random.default_rng(0)
    return Dataset(
        "cifar-10-synthetic",
        rng.integers(0, 256, size=(50000, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 10, size=50000, dtype=np.uint8),
        rng.integers(0, 256, size=(10000, 32, 32, 3), dtype=np.uint8),
        rng.integers(0, 10, size=10000, dtype=np.uint8),
        source=f"synthetic (no CIFAR-10 files in {where})",
        synthetic=True,
        note=(
            f"CIFAR-10 not found, ran on random synthetic data: put data_batch_1..data_batch_5 and test_batch "
            f"(python pickles, or the same names with .bin for the binary version) in one of {where}, "
            f"or in {' or '.join(_CIFAR_ARCHIVE_DIRS)} next to or under them."
        ),
    )
