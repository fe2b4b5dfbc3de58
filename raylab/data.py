"""Datasets: the IDX reader, the data search path, object-store hand-off and sharding.

Data is read once on the driver, put into Ray's object store as numpy arrays (workers get
zero-copy read-only views) and each worker takes a disjoint, seeded shard of it. No worker
ever opens a driver-local path, so the same code works on a multi-node cluster.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

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
        raise UserError(f"{path} is truncated or padded: {len(body)} data bytes, expected {expected}; re-install the dataset.")
    return np.frombuffer(body, dtype=np.uint8).reshape(header)


def find_idx_files(subdir: str, files: dict[str, str]) -> dict[str, Path]:
    """The first directory on the search path that holds all files (plain or .gz)."""
    for directory in data_search_path(subdir):
        found = {}
        for key, stem in files.items():
            for name in (stem + ".gz", stem):
                if (directory / name).is_file():
                    found[key] = directory / name
                    break
        if len(found) == len(files):
            return found
    names = ", ".join(f"{stem}.gz" for stem in files.values())
    where = ", ".join(str(p) for p in data_search_path(subdir))
    raise UserError(
        f"{subdir} data not found: put {names} (gzipped or plain) in one of {where}, "
        "or install Debian's dataset-fashion-mnist (scripts/setup.sh does)."
    )


@dataclass
class Dataset:
    """An in-memory classification dataset. Images stay uint8; workers scale them."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str  # where it was read from (recorded in MLflow)
    synthetic: bool = False

    def subset(self, n_train: int, n_test: int) -> "Dataset":
        """The first n items of each split (the smoke-run subset)."""
        return Dataset(
            self.name, self.x_train[:n_train], self.y_train[:n_train],
            self.x_test[:n_test], self.y_test[:n_test], self.source, self.synthetic,
        )


def fashion_mnist() -> Dataset:
    """Fashion-MNIST from the original IDX files, validated."""
    paths = find_idx_files("fashion-mnist", FASHION_FILES)
    arrays = {}
    for key, path in paths.items():
        is_images = key.startswith("x")
        arrays[key] = read_idx(path, 3 if is_images else 1, FASHION_COUNTS[key], (28, 28) if is_images else ())
    for key in ("y_train", "y_test"):
        if arrays[key].max() > 9:
            raise UserError(f"{paths[key]} has label {arrays[key].max()}, outside 0..9; the file is corrupt.")
    return Dataset("fashion-mnist", **arrays, source=str(paths["x_train"].parent))


def shard_indices(n: int, world: int, rank: int, seed: int) -> np.ndarray:
    """Rank's disjoint part of a seeded permutation of range(n); all shards have equal length.

    Equal lengths matter: synchronous strategies deadlock if one worker runs more steps.
    """
    assert 0 <= rank < world
    perm = np.random.default_rng(seed).permutation(n)
    per = n // world
    return np.sort(perm[rank * per : (rank + 1) * per])


def put_dataset(ds: Dataset) -> dict:
    """Puts the arrays into the object store once; the dict of refs travels to every worker."""
    import ray

    return {k: ray.put(getattr(ds, k)) for k in ("x_train", "y_train", "x_test", "y_test")}


def worker_shard(refs: dict, world: int, rank: int, seed: int):
    """On a worker: (x_train, y_train) shard and the full test split, from the object store."""
    import ray

    x_train, y_train, x_test, y_test = (ray.get(refs[k]) for k in ("x_train", "y_train", "x_test", "y_test"))
    idx = shard_indices(len(x_train), world, rank, seed)
    return x_train[idx], y_train[idx], x_test, y_test
