"""A stream's files, checked before Ray starts: the manifest `raylab data export` writes beside its splits, the
paths a stream names (raylab/data/stream.py's sources call these; the columns of Parquet files:
raylab/data/chunks.py)."""

from __future__ import annotations

import json
from pathlib import Path

from raylab.errors import UserError

MANIFEST = "raylab-data.json"
SPLIT_NAMES = ("train", "test")


def exists(*paths: str) -> None:
    for p in paths:
        if "://" not in p and not Path(p).exists():
            raise UserError(f"{p} does not exist; point the stream at a directory of files (or a gs:// / s3:// URI).")


def read_manifest(path: Path) -> dict:
    if not (path / MANIFEST).is_file():
        if not path.exists():
            raise UserError(f"--data {path}: no such directory; write one with `raylab data export RECIPE {path}`.")
        raise UserError(
            f"--data {path}: no {MANIFEST} there; it is not a directory `raylab data export` wrote "
            "(for other Parquet files, use raylab.data.stream.parquet(train=..., test=..., inputs=..., targets=...))."
        )
    return json.loads((path / MANIFEST).read_text())
