"""A worker's data: its part of the train split and, on rank 0, the test split, in memory or streamed.

In memory (raylab/data/__init__.py): the arrays come from the object store (zero-copy on the node), the worker gathers
its seeded shard and prepares it once; only rank 0 prepares the test split, the only one that evaluates.

Streamed (raylab/data/stream.py): the worker reads its equal split of the train dataset from Ray Train
(`get_dataset_shard("train")`), one pass per epoch, and prepares each batch as it arrives (the recipe's
preprocessing, per framework, on a Ray Data prefetch thread where the framework's iterator has one); rank 0
reads the test dataset in batches to evaluate. Every worker holds its prefetch buffers, never its split.
"""

from __future__ import annotations

from typing import Any, Callable

from raylab.data import num_items, shard_indices, tree_map
from raylab.data.stream import StreamInfo

PREFETCH_BATCHES = 2  # Ray Data batches fetched ahead of the step (ray's default is 1)


def is_streamed(cfg) -> bool:
    return isinstance(cfg.shared, StreamInfo)


class MemoryShard:
    """This worker's seeded shard of in-memory arrays, prepared once (prepare(x, y) -> (x, y))."""

    streamed = False

    def __init__(self, refs: dict, world: int, rank: int, seed: int, prepare: Callable):
        import ray

        x, y = ray.get(refs["x_train"]), ray.get(refs["y_train"])
        idx = shard_indices(num_items(x), world, rank, seed)
        self.x, self.y = prepare(tree_map(lambda a: a[idx], x), tree_map(lambda a: a[idx], y))
        self.items, self.rank = len(idx), rank
        self._test_refs, self._prepare, self._test = (refs["x_test"], refs["y_test"]), prepare, None

    def test(self):
        """(x, y) of the whole test split, prepared on first use (rank 0 only evaluates)."""
        import ray

        if self._test is None:
            self._test = self._prepare(*(ray.get(r) for r in self._test_refs))
        return self._test

    def sample(self):
        """Inputs the built report describes: on rank 0 (the one that reports) the whole prepared test split,
        so every trial of a task reports the same range whatever its world size; elsewhere a train prefix,
        never reported, so that no other rank prepares the test split."""
        if self.rank == 0:
            return self.test()[0]
        return self.x[:256] if not isinstance(self.x, dict) else {k: v[:256] for k, v in self.x.items()}


class StreamShard:
    """This worker's streaming split of the train dataset, and the test dataset (read by rank 0)."""

    streamed = True

    def __init__(self, info: StreamInfo, world: int, prepare: Callable):
        import ray.train

        self.info, self.prepare = info, prepare
        self.items = info.train_items // world  # equal splits: every worker gets as many rows
        self.shard = ray.train.get_dataset_shard("train")
        self.epochs = 0

    def batches(self, batch: int, seed: int, convert: Callable = lambda xy: xy, torch: bool = False) -> Callable:
        """epoch() -> one pass of prepared (converted) batches of this worker's split, whole batches only.

        Rows are shuffled within a buffer of 8 batches (seeded per pass); file order is shuffled at the read."""
        def collate(batch_np: dict):
            return convert(self.prepare(*self.info.split(batch_np)))

        def epoch():
            self.epochs += 1
            options = dict(batch_size=batch, drop_last=True, prefetch_batches=PREFETCH_BATCHES,
                           local_shuffle_buffer_size=8 * batch, local_shuffle_seed=seed + self.epochs)
            # The collate function (preparing, making tensors) runs on Ray Data's prefetch thread, off the step's.
            if torch:
                return self.shard.iter_torch_batches(collate_fn=collate, **options)
            # numpy for TF: the same collate hook, which Ray 2.60's public iter_batches does not expose.
            return self.shard._iter_batches(batch_format="numpy", _collate_fn=collate, **options)

        return epoch

    def test(self, size: int = 512):
        """The test split's prepared batches (an iterable the task's evaluator reads once per evaluation)."""
        import ray.train

        return TestPass(ray.train.get_dataset_shard("test"), self.info, self.prepare, size)

    def sample(self):
        return next(iter(self.test(64)))[0]

    def stats(self) -> str:
        """Ray Data's own statistics of this worker's reads (time blocked, bytes, per operator)."""
        return str(self.shard.stats())


class TestPass:
    def __init__(self, dataset, info: StreamInfo, prepare: Callable, size: int):
        self.dataset, self.info, self.prepare, self.size = dataset, info, prepare, size

    def __iter__(self):
        for b in self.dataset.iter_batches(batch_size=self.size, batch_format="numpy", prefetch_batches=PREFETCH_BATCHES):
            yield self.prepare(*self.info.split(b))


def worker_data(cfg, world: int, rank: int, prepare: Callable) -> Any:
    """This worker's data: a StreamShard for a streamed dataset, else its MemoryShard."""
    if is_streamed(cfg):
        return StreamShard(cfg.shared, world, prepare)
    return MemoryShard(cfg.shared, world, rank, cfg.seed, prepare)


def items_per_worker(cfg, world: int) -> int:
    """Train items each worker gets per epoch (equal for every worker: shard_indices, streaming_split(equal=True))."""
    if is_streamed(cfg):
        return cfg.shared.train_items // world
    import ray

    return num_items(ray.get(cfg.shared["y_train"])) // world


def data_facts(data) -> dict:
    """What a trial records of how its input ran."""
    if not data.streamed:
        return {"input": "in memory (object store, seeded shard per worker)"}
    return {"input": f"streamed (Ray Data streaming_split, {PREFETCH_BATCHES} batches prefetched, rows shuffled "
                     "in an 8-batch buffer)", "input_items_per_worker": data.items}


def stream_stats(data, rank: int) -> Callable[[], dict] | None:
    """Rank 0 of a streamed trial sends Ray Data's iterator statistics with its result (logged as an artifact)."""
    if not data.streamed or rank != 0:
        return None
    return lambda: {"ray_data_stats": data.stats()}


def evaluation(data, evaluate: Callable) -> Callable[[], dict]:
    """The loop's evaluate(): over the in-memory test split, or over one pass of the streamed one."""
    if data.streamed:
        return lambda: evaluate(data.test())
    return lambda: evaluate(*data.test())
