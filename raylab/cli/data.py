"""`raylab data export RECIPE DIR`: a recipe's in-memory dataset as Parquet shards, to train on streamed.

The directory holds train/ and test/ (Parquet files of Ray Data tensor columns: x and y, or the recipe's named
inputs and targets) and raylab-data.json (the columns, the item counts, where the data came from), which
`--data DIR` reads. The same task can then run in memory and streamed, and the two compared.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from raylab.data import as_dataset, num_items, tree_map
from raylab.data.stream import MANIFEST, SPLIT_NAMES
from raylab.errors import UserError


def data_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="raylab data", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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
            raise UserError(f"{args.recipe}: its data is already streamed ({ds.source}); nothing to export.")
        manifest = export(ds, args.directory, args.rows_per_file)
    except UserError as err:
        print(f"raylab: error: {err}", file=sys.stderr)
        return err.exit_code
    size = sum(f.stat().st_size for f in args.directory.rglob("*") if f.is_file())
    print(f"raylab: wrote {manifest['train_items']} train / {manifest['test_items']} test items of {ds.name} to "
          f"{args.directory} ({size / 1e6:.1f} MB); train on them with: python {args.recipe} --data {args.directory}")
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
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ray.data.extensions import ArrowTensorArray

    if directory.exists() and any(directory.iterdir()):
        raise UserError(f"{directory} is not empty; export into a new directory (nothing was written).")
    inputs = "x" if not isinstance(ds.x_train, dict) else tuple(ds.x_train)
    targets = "y" if not isinstance(ds.y_train, dict) else tuple(ds.y_train)
    for split in SPLIT_NAMES:
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        named = {**_named(x, inputs), **_named(y, targets)}
        out = directory / split
        out.mkdir(parents=True)
        n = num_items(x)
        for i, start in enumerate(range(0, n, rows_per_file)):
            part = tree_map(lambda a: a[start:start + rows_per_file], named)
            table = pa.table({k: ArrowTensorArray.from_numpy(np.ascontiguousarray(v)) if v.ndim > 1 else pa.array(v)
                              for k, v in part.items()})
            pq.write_table(table, out / f"part-{i:05d}.parquet")
    manifest = {"name": ds.name, "inputs": inputs, "targets": targets, "train_items": num_items(ds.x_train),
                "test_items": num_items(ds.x_test), "source": f"Parquet in {directory} (exported from {ds.source})",
                "synthetic": ds.synthetic}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


def _named(x, spec) -> dict:
    return {spec: x} if isinstance(spec, str) else dict(x)

