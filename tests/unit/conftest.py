"""Shared unit-test fixtures: an isolated HOME and cwd, real IDX files, real MLflow sqlite stores."""

from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest


def write_idx(path: Path, array: np.ndarray) -> Path:
    """Writes `array` (uint8) as an IDX file, gzipped if the name ends in .gz."""
    array = np.asarray(array, dtype=np.uint8)
    raw = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw, compresslevel=1, mtime=0) if path.suffix == ".gz" else raw)
    return path


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """Every test runs in its own cwd and HOME, with no data dir or tracking URI inherited."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)  # MLflow puts sqlite stores' artifacts under ./mlruns
    for var in ("RAYLAB_DATA_DIR", "MLFLOW_TRACKING_URI", "RAY_ADDRESS", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def fashion_root(tmp_path_factory) -> Path:
    """A RAYLAB_DATA_DIR holding real-sized synthetic Fashion-MNIST (images plain, labels gzipped)."""
    root = tmp_path_factory.mktemp("data")
    d = root / "fashion-mnist"
    write_idx(d / "train-images-idx3-ubyte", np.zeros((60000, 28, 28), np.uint8))
    write_idx(d / "train-labels-idx1-ubyte.gz", np.arange(60000) % 10)
    write_idx(d / "t10k-images-idx3-ubyte", np.full((10000, 28, 28), 7, np.uint8))
    write_idx(d / "t10k-labels-idx1-ubyte.gz", np.arange(10000) % 10)
    return root


@pytest.fixture
def mlflow_uri(template_db, tmp_path) -> str:
    """A fresh, real MLflow sqlite store in this test's tmp_path."""
    db = tmp_path / "mlflow.db"
    shutil.copy(template_db, db)
    return f"sqlite:///{db}"
