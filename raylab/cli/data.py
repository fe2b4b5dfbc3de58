"""`raylab data export RECIPE DIR`: a recipe's dataset as Parquet shards, to train on streamed.

In-memory data is written from its arrays. A streamed source (an image folder, a generator, Parquet written some
other way) is read once through its Ray Data pipeline, on a local Ray cluster, and written as it comes: repeated
comparisons then read Parquet of contiguous tensor columns instead of decoding every image again each epoch.

The directory holds train/ and test/ (Parquet files of Ray Data tensor columns: x and y, or the recipe's named
inputs and targets) and raylab-data.json (the columns, the item counts, where the data came from), which
`--data DIR` reads. The same task can then run in memory and streamed, and the two compared.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import sys
from pathlib import Path

import numpy as np

from raylab.data import as_dataset, num_items, tree_map
from raylab.data.files import MANIFEST, SPLIT_NAMES
from raylab.errors import UserError


def data_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="raylab data", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write a recipe's dataset as Parquet shards (and a manifest) into DIR")
    e.add_argument("recipe", help="a recipe file (e.g. recipes/fashion.py) whose RECIPE's data is exported")
    e.add_argument("directory", type=Path, help="a new (or empty) directory")
    e.add_argument("--rows-per-file", type=int, default=8192, help="rows in each Parquet file (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        recipe = load_recipe(args.recipe)
        ds = as_dataset(recipe.data, recipe.name)
        if ds.streamed:
            manifest = export_stream(ds, args.directory, args.rows_per_file)
        else:
            manifest = export(ds, args.directory, args.rows_per_file)
    except UserError as err:
        print(f"raylab: error: {err}", file=sys.stderr)
        return err.exit_code
    size = sum(f.stat().st_size for f in args.directory.rglob("*") if f.is_file())
    print(
        f"raylab: wrote {manifest['train_items']} train / {manifest['test_items']} test items of {ds.name} to "
        f"{args.directory} ({size / 1e6:.1f} MB); train on them with: python {args.recipe} --data {args.directory}"
    )
    return 0


def load_recipe(path: str):
    """The RECIPE a recipe file defines (imported as a module, its __main__ block not run)."""
    if not Path(path).is_file():
        raise UserError(f"{path}: no such recipe file; give the path of a recipe such as recipes/fashion.py.")
    spec = importlib.util.spec_from_file_location("raylab_exported_recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "RECIPE"):
        raise UserError(f"{path} defines no RECIPE; a recipe file defines RECIPE = raylab.Recipe(...).")
    return module.RECIPE


def export(ds, directory: Path, rows_per_file: int = 8192) -> dict:
    """Writes an in-memory raylab.data.Dataset as Parquet shards (Ray Data tensor columns) and a manifest;
    returns the manifest. Nothing is written into a directory that is not empty."""
    _refuse_if_not_empty(directory)
    spec = _spec(ds.x_train, ds.y_train)
    for split in SPLIT_NAMES:
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        named = _named(x, y, spec)
        out = directory / split
        out.mkdir(parents=True)
        for i, start in enumerate(range(0, num_items(x), rows_per_file)):
            _write_part(tree_map(lambda a: a[start : start + rows_per_file], named), out / f"part-{i:05d}.parquet")
    manifest = {
        "name": ds.name,
        **spec,
        "train_items": num_items(ds.x_train),
        "test_items": num_items(ds.x_test),
        "source": f"Parquet in {directory} (exported from {ds.source})",
        "synthetic": ds.synthetic,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def export_stream(stream, directory: Path, rows_per_file: int = 8192) -> dict:
    """Writes a streamed source's two splits (read through its Ray Data pipeline, on a local Ray cluster that is
    started here) as Parquet shards of dense tensor columns, and a manifest; returns the manifest."""
    import ray
    import ray.data

    from raylab.data.chunks import numpy_block
    from raylab.data.opened import open_stream

    _refuse_if_not_empty(directory)
    if stream.check is not None:
        stream.check()
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # raylab's progress lines, not Ray Data's
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        opened = open_stream(stream)
        names = tuple(dict.fromkeys(opened.info.names()))
        items, spec = {}, {}
        for split in SPLIT_NAMES:
            out = directory / split
            out.mkdir(parents=True)
            written, part = 0, 0
            total = opened.info.train_items if split == "train" else opened.info.test_items
            for block in opened.datasets[split].iter_batches(batch_size=rows_per_file, batch_format="pyarrow"):
                x, y = opened.info.split(numpy_block(block, names))  # stacked() columns become one column x
                spec = _spec(x, y)
                _write_part(_named(x, y, spec), out / f"part-{part:05d}.parquet")
                part, written = part + 1, written + num_items(y)
                print(f"raylab: {split}: {written:,} of {total:,} items written", file=sys.stderr, flush=True)
            items[split] = written
    finally:
        if started:
            ray.shutdown()
    manifest = {
        "name": stream.name,
        **spec,
        "train_items": items["train"],
        "test_items": items["test"],
        "source": f"Parquet in {directory} (exported from {stream.source})",
        "synthetic": stream.synthetic,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _refuse_if_not_empty(directory: Path) -> None:
    if directory.exists() and any(directory.iterdir()):
        raise UserError(f"{directory} is not empty; export into a new directory (nothing was written).")


def _spec(x, y) -> dict:
    """The manifest's column names: x and y, or the named inputs' and targets' own."""
    return {
        "inputs": "x" if not isinstance(x, dict) else tuple(x),
        "targets": "y" if not isinstance(y, dict) else tuple(y),
    }


def _named(x, y, spec: dict) -> dict:
    def one(a, names):
        return {names: a} if isinstance(names, str) else dict(a)

    return {**one(x, spec["inputs"]), **one(y, spec["targets"])}


def _write_part(named: dict, path: Path) -> None:
    """One Parquet file: arrays of more than one axis as Ray Data tensor columns, the rest as plain columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ray.data.extensions import ArrowTensorArray

    pq.write_table(
        pa.table(
            {
                k: ArrowTensorArray.from_numpy(np.ascontiguousarray(v)) if v.ndim > 1 else pa.array(v)
                for k, v in named.items()
            }
        ),
        path,
    )
