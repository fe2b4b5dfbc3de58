"""Streamed datasets: data that need not fit in memory, read by Ray Data while a trial trains.

A recipe's `data` may be a Stream instead of in-memory arrays. A Stream describes where the train and
test splits come from and which columns hold the inputs and the targets; nothing is read on the driver
but metadata. Each trial hands the two Ray Data datasets to Ray Train (`datasets=`): every training
worker gets an equal streaming split of the train split (raylab/data/shard.py turns it into the framework's
batches, raylab/data/deliver.py cuts them from large Arrow chunks) and rank 0 reads the whole test split to evaluate.

Sources (each with `inputs` and `targets`: a column name, a tuple of names for named inputs/targets, or
stacked("a", "b", ...) for scalar columns gathered into one input):

    parquet(path)             a directory written by `raylab data export` (train/, test/, raylab-data.json),
                              or parquet(train=URI, test=URI, ...) for any Parquet files, local or
                              gs:// / s3:// (passed to Ray Data's read_parquet as given)
    npy(train={...}, test={...})   one directory (or URI) of .npy shards per column, zipped row by row
    images(train_dir, test_dir, size=(h, w))   one sub-folder per class; decoded (PIL) and resized in Ray Data tasks
    generator(fn, train_items, test_items)     fn(ids, split) makes items on the Ray Data side, from nothing
    ray_dataset(train, test)  your own Ray Data Datasets (or functions returning them)

`pipeline=` adds a function run inside the pipeline (Ray Data map_batches, numpy batch -> numpy batch);
the recipe's `preprocess` still runs per framework on each batch, as for in-memory data.

Every pass of the train split is shuffled: each worker mixes its rows in a shuffle window (raylab/data/shuffle.py,
the whole split where it fits), and the sources that have several files or blocks read them in a new seeded order
every pass (Stream.order says which: Ray Data's file shuffle and randomize_block_order, seeded with the run's seed
and Ray Data's count of the dataset's executions), so rows the window cannot hold together still mix over passes.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from raylab.data.chunks import check_parquet
from raylab.data.files import SPLIT_NAMES, exists, read_manifest
from raylab.data.image_folders import IMAGES_PER_TASK, classes, decoder, listing
from raylab.data.shuffle import aligned_shards, blocks_per_pass, per_pass
from raylab.errors import UserError

# The public names (docs/api.md); the rest serve raylab itself and may change (a stream opened once Ray is up:
# raylab/data/opened.py).
__all__ = ["Stream", "generator", "images", "npy", "parquet", "ray_dataset", "stacked"]


@dataclass(frozen=True)
class Stacked:
    """Several columns of one value per row (or of one shape) gathered into one input, side by side on a last
    axis: `inputs=stream.stacked("f0", "f1", ...)` makes [rows, n] of n scalar columns."""

    names: tuple[str, ...]

    def __iter__(self):
        return iter(self.names)


def stacked(*names: str) -> Stacked:
    """Scalar (or same-shaped) columns as one input, in the order given: `inputs=stacked("age", "income", ...)`."""
    if not names or not all(isinstance(n, str) for n in names):
        raise UserError("stacked(): give the column names to gather into one input, e.g. stacked('f0', 'f1').")
    return Stacked(tuple(names))


def columns(spec) -> tuple[str, ...]:
    """Every column a spec reads (a name, a tuple of names, a stacked() group, or a tuple holding groups)."""
    if isinstance(spec, str):
        return (spec,)
    if isinstance(spec, Stacked):
        return spec.names
    return tuple(c for part in spec for c in columns(part))


@dataclass(frozen=True)
class StreamInfo:
    """What a worker needs to know of a stream (picklable; the datasets themselves go through Ray Train)."""

    inputs: str | tuple[str, ...]
    targets: str | tuple[str, ...]
    train_items: int
    test_items: int
    order: str = "blocks in the source's order"  # how the train split's files or blocks are ordered (Stream.order)

    def names(self) -> tuple[str, ...]:
        """The columns a worker reads: the inputs' and the targets'."""
        return columns(self.inputs) + columns(self.targets)

    def split(self, batch: dict):
        """(x, y) of a numpy batch: one array per name (or stacked() group), or a dict of named arrays for a tuple."""

        def one(spec):
            if isinstance(spec, Stacked):
                return np.stack([_dense(batch[k]) for k in spec.names], axis=-1)
            return _dense(batch[spec])

        def pick(spec):
            if isinstance(spec, (str, Stacked)):
                return one(spec)
            return {(k if isinstance(k, str) else "+".join(k.names)): one(k) for k in spec}

        return pick(self.inputs), pick(self.targets)


def _dense(a: np.ndarray) -> np.ndarray:
    """A column as one array: Parquet list columns come back as an object array of rows."""
    return np.stack(a) if a.dtype == object else a


@dataclass
class Stream:
    """A dataset read by Ray Data as the trial trains (see the module's docstring for the sources)."""

    name: str
    make: Callable[[str, int], Any]  # (split, seed) -> a lazy ray.data.Dataset (called on the driver, after Ray starts)
    source: str  # where it is read from (recorded in MLflow)
    inputs: str | tuple[str, ...] = "x"
    targets: str | tuple[str, ...] = "y"
    train_items: int | None = None  # None: counted by Ray Data (from metadata where the format has it)
    test_items: int | None = None
    pipeline: Callable | None = None  # map_batches inside the pipeline, numpy dict -> numpy dict
    synthetic: bool = False
    note: str = ""
    check: Callable[[], None] | None = field(default=None, repr=False)  # cheap checks before Ray starts
    order: str = "blocks in the source's order"  # the train split's files or blocks, per pass (the `shuffle` param)
    streamed = True  # (a class attribute) an in-memory raylab.data.Dataset says False

    @property
    def target_names(self) -> tuple[str, ...]:
        if isinstance(self.targets, (str, Stacked)):
            return ()
        return tuple(k if isinstance(k, str) else "+".join(k.names) for k in self.targets)

    def dataset(self, split: str, limit: int | None = None, seed: int = 0):
        """The split as a lazy Ray Data Dataset with the pipeline's map applied (and the --quick limit); `seed`
        seeds the train split's order of files or blocks (a new one every pass)."""
        ds = self.make(split, seed)
        if self.pipeline is not None:
            ds = ds.map_batches(self.pipeline, batch_format="numpy")
        return ds.limit(limit) if limit else ds


def parquet(
    path: str | None = None,
    *,
    train: str | None = None,
    test: str | None = None,
    inputs="x",
    targets="y",
    name: str | None = None,
    pipeline=None,
) -> Stream:
    """Parquet files: a directory `raylab data export` wrote (its manifest names the columns), or train=/test=."""
    manifest = {}
    if path is not None:
        train, test = f"{path.rstrip('/')}/train", f"{path.rstrip('/')}/test"
        if "://" not in path:
            manifest = read_manifest(Path(path))
    elif train is None or test is None:
        raise UserError("parquet(): give a directory `raylab data export` wrote, or both train= and test= paths.")
    inputs, targets = manifest.get("inputs", inputs), manifest.get("targets", targets)
    inputs, targets = (
        (inputs if isinstance(inputs, (str, Stacked)) else tuple(inputs)),
        (targets if isinstance(targets, (str, Stacked)) else tuple(targets)),
    )

    def make(split, seed):
        import ray.data

        with parquet_reader():
            ds = ray.data.read_parquet(
                train if split == "train" else test, shuffle=per_pass(seed) if split == "train" else None
            )
        return ds.select_columns([*columns(inputs), *columns(targets)])  # pushed down into the read

    return Stream(
        name or manifest.get("name") or Path(train).parent.name,
        make,
        manifest.get("source", f"Parquet in {train}, {test}"),
        inputs,
        targets,
        manifest.get("train_items"),
        manifest.get("test_items"),
        pipeline,
        synthetic=manifest.get("synthetic", False),
        check=lambda: exists(train, test) or check_parquet((train, test), (*columns(inputs), *columns(targets))),
        order="files in a new seeded order every pass (each file's row groups in order)",
    )


@contextmanager
def parquet_reader():
    """Ray 2.60's default Parquet reader (DataSource V2: a ListFiles task, then ReadFiles) takes 1.1-1.2 s to start
    each pass over a few files on this 2-CPU machine, its V1 reader 0.12-0.16 s (bench/studies/delivery.py); every epoch
    is a pass, so raylab reads with V1 unless RAY_DATA_USE_DATASOURCE_V2 says otherwise."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    before = ctx.use_datasource_v2
    if os.environ.get("RAY_DATA_USE_DATASOURCE_V2") is None:
        ctx.use_datasource_v2 = False
    try:
        yield
    finally:
        ctx.use_datasource_v2 = before


def npy(train: dict[str, str], test: dict[str, str], *, inputs="x", targets="y", name="npy", pipeline=None) -> Stream:
    """.npy shards, one directory (or URI) per column, their rows in the same order in every column."""
    if set(train) != set(test) or not set(columns(inputs)) | set(columns(targets)) <= set(train):
        raise UserError(
            f"npy(): train and test need the same columns, holding {columns(inputs) + columns(targets)}; "
            f"got {sorted(train)} and {sorted(test)}."
        )

    aligned = aligned_shards(list(train.values()))

    def make(split, seed):
        import ray.data

        paths = train if split == "train" else test
        # every column's files in the same new order each pass (one seed), where their shards line up row for row
        order = per_pass(seed) if split == "train" and aligned else None
        parts = [
            ray.data.read_numpy(p, override_num_blocks=None, shuffle=order).rename_columns({"data": c})
            for c, p in paths.items()
        ]
        return parts[0].zip(*parts[1:]) if len(parts) > 1 else parts[0]

    return Stream(
        name,
        make,
        f".npy shards in {', '.join(train.values())}",
        inputs,
        targets,
        pipeline=pipeline,
        check=lambda: exists(*train.values(), *test.values()),
        order="files in a new seeded order every pass"
        if aligned
        else "files in the source's order (the columns' shards do not line up file for file)",
    )


def images(
    train: str, test: str, *, size: tuple[int, int], mode: str = "RGB", name: str | None = None, pipeline=None
) -> Stream:
    """An image folder per split, one sub-folder per class (sorted names are classes 0, 1, ...): columns x
    (uint8, size x channels) and y (the class). The files are listed on the driver (names only); Ray Data's
    tasks decode IMAGES_PER_TASK of them at a time with PIL (converted to `mode`, resized to `size` where they
    differ). `ray.data.read_images` decoded 1,100-1,300 images/s here, a task per 1,024 files 9,000-11,000."""
    found = classes(train)
    listed: dict = {}  # listed when the driver opens the stream (not when a recipe module is imported)

    def make(split, seed):
        import pyarrow as pa
        import ray.data

        if split not in listed:
            listed[split] = listing(train if split == "train" else test, found)
        paths, labels = listed[split]
        table = pa.table({"path": paths, "y": labels})
        if split == "train":  # files mixed across classes (a folder lists one class after another)
            table = table.take(np.random.default_rng(0).permutation(len(paths)))
        parts = [table.slice(i, IMAGES_PER_TASK) for i in range(0, len(paths), IMAGES_PER_TASK)] or [table]
        ds = ray.data.from_arrow(parts)
        if split == "train":
            ds = blocks_per_pass(ds, seed)  # and the blocks of file names in a new order every pass (before decoding)
        return ds.map_batches(decoder(size, mode), batch_size=IMAGES_PER_TASK, batch_format="numpy")

    folder = Path(train).parent.name if Path(train).name.lower() in SPLIT_NAMES + ("training",) else Path(train).name
    return Stream(
        name or folder,
        make,
        f"images in {train}, {test} ({len(found)} classes)",
        "x",
        "y",
        pipeline=pipeline,
        check=lambda: exists(train, test),
        order=f"files mixed across classes once, blocks of {IMAGES_PER_TASK} in a new seeded order every pass",
    )


def generator(
    fn: Callable[[np.ndarray, str], dict],
    train_items: int,
    test_items: int,
    *,
    inputs="x",
    targets="y",
    name="generated",
    batch: int = 256,
    pipeline=None,
    source: str = "",
) -> Stream:
    """Items made by fn(ids, split) -> {column: array with one row per id}, on the Ray Data side: nothing on disk
    and nothing on the driver, at any size. fn should be deterministic in (ids, split)."""

    def make(split, seed):
        import ray.data

        n = train_items if split == "train" else test_items
        ids = blocks_per_pass(ray.data.range(n), seed) if split == "train" else ray.data.range(n)
        return ids.map_batches(lambda b: fn(b["id"], split), batch_size=batch, batch_format="numpy")

    return Stream(
        name,
        make,
        source or f"generated by {getattr(fn, '__name__', 'a function')}",
        inputs,
        targets,
        train_items,
        test_items,
        pipeline,
        synthetic=True,
        order="blocks of ids in a new seeded order every pass",
    )


def ray_dataset(train, test, *, inputs="x", targets="y", name="ray-dataset", pipeline=None) -> Stream:
    """Your own Ray Data pipeline: Datasets, or functions returning them (called on the driver after Ray starts)."""

    def make(split, seed):
        ds = train if split == "train" else test
        return ds() if callable(ds) else ds

    # Its blocks are not reordered: randomize_block_order waits for every block of a pipeline before the first goes
    # on (the whole dataset, read); a pipeline of your own can call it where its blocks are small (file names).
    return Stream(
        name, make, "a Ray Data pipeline", inputs, targets, pipeline=pipeline, order="blocks in the dataset's own order"
    )
