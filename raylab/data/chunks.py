"""The chunks a worker takes from Ray Data, as numpy: how many rows a chunk holds, each Arrow column as one contiguous
array (`dense`: list, fixed-size-list and tensor columns through Arrow, never row by row in Python), and the few
operations raylab/data/deliver.py cuts them with."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from raylab.errors import UserError

MIN_CHUNK_ROWS = 2048


def chunk_rows(batch: int) -> int:
    """Rows a worker takes from Ray Data at a time: 8 batches, and at least MIN_CHUNK_ROWS."""
    return max(8 * batch, MIN_CHUNK_ROWS)


def dense(table, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The named columns of an Arrow table, each one numpy array with a row per table row (a list column of
    20 floats per row: [rows, 20]). A UserError names a column whose rows differ in shape or that has nulls."""
    out = {}
    for name in names:
        if name not in table.column_names:
            raise UserError(
                f"the stream has no column {name!r} (it has {', '.join(table.column_names)}); "
                "name the stream's inputs= and targets= after its columns."
            )
        out[name] = column_array(table.column(name), name)
    return out


def column_array(column, name: str) -> np.ndarray:
    chunks = column.chunks if hasattr(column, "chunks") else [column]
    parts = [_array(c, name) for c in chunks if len(c)]
    if not parts:
        return _array(chunks[0], name) if chunks else np.empty((0,))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _array(arr, name: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if isinstance(t, pa.ExtensionType):  # Ray Data's tensor columns (what `raylab data export` writes)
        a = arr.to_numpy()
        return _stacked(a, name) if a.dtype == object else a
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if arr.null_count:
            raise UserError(f"column {name!r} has {arr.null_count} missing rows; fill or drop them before training.")
        n = len(arr)
        if pa.types.is_fixed_size_list(t):
            width = t.list_size
        else:
            lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
            width = int(lengths[0]) if n else 0
            bad = np.flatnonzero(lengths != width)
            if len(bad):
                raise UserError(
                    f"column {name!r}: rows hold lists of different lengths ({width} in a row, "
                    f"{int(lengths[bad[0]])} in another); every row of a column needs the same shape "
                    "(pad or crop them when writing the files)."
                )
        inner = _array(arr.flatten(), name)
        return inner.reshape(n, width, *inner.shape[1:])
    if arr.null_count:
        raise UserError(f"column {name!r} has {arr.null_count} missing values; fill or drop them before training.")
    return arr.to_numpy(zero_copy_only=False)


def _stacked(rows: np.ndarray, name: str) -> np.ndarray:
    shapes = {np.shape(r) for r in rows}
    if len(shapes) > 1:
        a, b = sorted(shapes)[:2]
        raise UserError(
            f"column {name!r}: rows hold arrays of different shapes ({a} and {b}); every row of a "
            "column needs the same shape (resize or pad them when writing the data)."
        )
    return np.stack(rows) if len(rows) else np.empty((0,))


def numpy_block(block, names: Iterable[str]) -> dict[str, np.ndarray]:
    """A chunk as Ray Data handed it (an Arrow table, or a dict of numpy arrays) as dense numpy columns."""
    if isinstance(block, dict):
        return {k: (_stacked(block[k], k) if block[k].dtype == object else block[k]) for k in names}
    return dense(block, names)


def rows(chunk: dict) -> int:
    return len(next(iter(chunk.values())))


def nbytes(chunk: dict) -> int:
    return sum(getattr(a, "nbytes", 0) for a in chunk.values())


def take(chunk: dict, idx) -> dict:
    return {k: a[idx] for k, a in chunk.items()}


def join(a: dict, b: dict) -> dict:
    return {k: np.concatenate([a[k], b[k]]) for k in a}


def check_parquet(paths: tuple[str, ...], names: tuple[str, ...]) -> None:
    """Before Ray starts, once the paths exist (raylab/data/files.py): the first rows of each split's first local file
    hold the columns, each of one shape per row (the check every chunk gets in the workers: dense above)."""
    import pyarrow.parquet as pq

    for path in paths:
        if "://" in path:
            continue
        files = [Path(path)] if Path(path).is_file() else sorted(Path(path).rglob("*.parquet"))
        if not files:
            raise UserError(f"{path} holds no .parquet files; point the stream at Parquet files.")
        with pq.ParquetFile(files[0]) as f:
            missing = [n for n in names if n not in f.schema_arrow.names]
            if missing:
                raise UserError(
                    f"{files[0]} has no column {missing[0]!r} (it has {', '.join(f.schema_arrow.names)}); "
                    "name the stream's inputs= and targets= after its columns."
                )
            head = next(f.iter_batches(batch_size=256, columns=list(dict.fromkeys(names))), None)
        if head is not None:
            try:
                dense(head, dict.fromkeys(names))
            except UserError as e:
                raise UserError(f"{files[0]}: {e}") from None
