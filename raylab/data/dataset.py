"""An in-memory dataset (`Dataset`), a recipe's data checked as one (`as_dataset`), its hand-off to the workers through
Ray's object store (`put_dataset`) and a worker's seeded shard of it (`shard_indices`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raylab.errors import UserError


def tree_map(fn, x):
    """fn over an array, or over each array of a dict of named arrays (several inputs or targets)."""
    return {k: fn(v) for k, v in x.items()} if isinstance(x, dict) else fn(x)


def num_items(x) -> int:
    return len(next(iter(x.values()))) if isinstance(x, dict) else len(x)


@dataclass
class Dataset:
    """An in-memory dataset: numpy arrays of any shape and dtype, or dicts of named arrays.

    Stored as read (images stay uint8); the recipe's preprocessing runs on the workers.
    """

    name: str
    x_train: np.ndarray | dict
    y_train: np.ndarray | dict
    x_test: np.ndarray | dict
    y_test: np.ndarray | dict
    source: str  # where it was read from (recorded in MLflow)
    synthetic: bool = False
    note: str = ""  # a caveat for the user (a fallback dataset, synthetic data), empty when none
    streamed = False  # (a class attribute) raylab.data.stream.Stream says True

    def subset(self, n_train: int, n_test: int) -> "Dataset":
        """The first n items of each split (the smoke-run subset)."""

        def head(n):
            return lambda a: a[:n]

        return Dataset(
            self.name,
            tree_map(head(n_train), self.x_train),
            tree_map(head(n_train), self.y_train),
            tree_map(head(n_test), self.x_test),
            tree_map(head(n_test), self.y_test),
            self.source,
            self.synthetic,
            self.note,
        )

    @property
    def input_dtypes(self) -> dict:
        """{input name (None for one array): its dtype's name}."""
        x = self.x_train
        return {k: str(a.dtype) for k, a in x.items()} if isinstance(x, dict) else {None: str(x.dtype)}

    @property
    def train_items(self) -> int:
        return num_items(self.x_train)

    @property
    def test_items(self) -> int:
        return num_items(self.x_test)

    @property
    def target_names(self) -> tuple[str, ...]:
        """The named targets (several outputs), or () for one target array."""
        return tuple(self.y_train) if isinstance(self.y_train, dict) else ()


SPLITS = ("x_train", "y_train", "x_test", "y_test")


def as_dataset(data, name: str) -> Dataset:
    """A recipe's data as a checked Dataset: a Dataset, (x_train, y_train, x_test, y_test) or a dict with
    those keys (each an array or a dict of named arrays), or a function returning any of them. Arrays are named by
    what made them: the function's name (`teacher_data`), else "arrays"."""
    from raylab.data.stream import Stream

    made_by = "arrays"
    if callable(data) and not isinstance(data, Dataset):
        made_by = getattr(data, "__name__", "") if getattr(data, "__name__", "").isidentifier() else made_by
        data = data()
    if isinstance(data, Stream):
        if data.check is not None:
            data.check()
        return data
    if isinstance(data, Dataset):
        ds = data
    elif isinstance(data, (tuple, list)) and len(data) == 4:
        ds = Dataset(made_by, *data, source="the recipe's arrays")
    elif isinstance(data, dict) and set(data) == set(SPLITS):
        ds = Dataset(made_by, *(data[k] for k in SPLITS), source="the recipe's arrays")
    else:
        raise UserError(
            f"recipe '{name}': data must be (x_train, y_train, x_test, y_test), a dict with those keys, "
            "a raylab.data.Dataset, a raylab.data.stream source, or a function returning one of them."
        )
    for split in SPLITS:
        for key, a in (
            getattr(ds, split).items() if isinstance(getattr(ds, split), dict) else [("", getattr(ds, split))]
        ):
            where = f"{split}[{key!r}]" if key else split
            if not isinstance(a, np.ndarray) or a.dtype.kind not in "biuf" or a.ndim < 1:
                raise UserError(
                    f"recipe '{name}': {where} must be a numeric numpy array (got "
                    f"{getattr(a, 'dtype', type(a).__name__)}); convert it with np.asarray(..., dtype=...)."
                )
    for a, b in (("x_train", "y_train"), ("x_test", "y_test")):
        lengths = {num_items(getattr(ds, a)), *(len(v) for v in _arrays(getattr(ds, a)) + _arrays(getattr(ds, b)))}
        if len(lengths) > 1:
            raise UserError(
                f"recipe '{name}': {a} and {b} hold different numbers of items ({sorted(lengths)}); "
                "every array of a split needs one item per example."
            )
    return ds


def _arrays(x) -> list:
    return list(x.values()) if isinstance(x, dict) else [x]


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
