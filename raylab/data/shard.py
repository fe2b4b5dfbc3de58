"""A worker's data: its part of the train split and, on rank 0, the test split, in memory or streamed.

In memory (raylab/data/dataset.py): the arrays come from the object store (zero-copy on the node), the worker gathers
its seeded shard and prepares it once; only rank 0 prepares the test split, the only one that evaluates.

Streamed (raylab/data/stream.py): the worker reads its equal split of the train dataset from Ray Train
(`get_dataset_shard("train")`) in large Arrow chunks, passes one after another, and cuts them into prepared batches on
threads of its own (raylab/data/deliver.py); rank 0 reads the test dataset to evaluate, once, as the worker starts and
before the train split's first pass, kept where it fits (raylab/data/held_out.py). Every worker holds its read-ahead,
never its split.
"""

from __future__ import annotations

from typing import Any, Callable

from raylab.data import num_items, shard_indices, tree_map
from raylab.data.held_out import TestPass, TestRange, TestRead
from raylab.data.stream import StreamInfo


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

    def __init__(self, info: StreamInfo, world: int, prepare: Callable, epochs: int = 1):
        import ray.train

        self.info, self.prepare, self.epochs = info, prepare, epochs
        self.items = info.train_items // world  # equal splits: every worker gets as many rows
        self.shard = ray.train.get_dataset_shard("train")  # the same iterator read_early's reader reads
        self._test: TestPass | None = None
        self.deliveries: Deliveries | None = None  # this worker's batches, once its batch source asked for them

    def batches(self, batch: int, seed: int, convert: Callable = lambda xy: xy) -> Deliveries:
        """What StreamBatches starts: this worker's passes over its split, chunks of chunk_rows(batch) rows from Ray
        Data (Arrow tables) cut into whole, prepared and converted batches in the worker (raylab/data/deliver.py).
        Rows are mixed across a shuffle window (raylab/data/shuffle.py: the whole split where it fits), a new
        seeded order every pass; the source's files or blocks are read in a new order every pass."""
        self.deliveries = Deliveries(self, batch, seed, convert)
        return self.deliveries

    def shuffle(self) -> str:
        """The shuffle this worker's passes got (recorded as the trial's `shuffle` param)."""
        delivery = self.deliveries.delivery if self.deliveries is not None else None
        return delivery.shuffle() if delivery is not None else "not started"

    def test(self, size: int = 512):
        """The test split's prepared batches (an iterable the task's evaluator reads once per evaluation)."""
        import ray.train

        if self._test is None:
            self._test = TestPass(
                ray.train.get_dataset_shard("test"), self.info, self.prepare, size, early=_early.pop("test", None)
            )
        return self._test

    def test_input(self) -> str:
        """How rank 0 read the test split (recorded as the trial's `test_input` tag, read when it reports)."""
        test = self._test
        if test is None:
            return "not read (no evaluation ran)"
        if test.read_early is not None:
            return (
                f"read once as the worker started, before the train split's first pass ({test.read_early:.1f} s), "
                "kept in memory"
            )
        if test.kept is not None:
            return "read at the first evaluation, kept in memory"
        return "read at every evaluation (larger than the read-ahead)"

    def sample(self):
        """What the built report describes: the range of every test input rank 0 evaluated on (the whole
        prepared test split, read at the first evaluation; in memory it is the same split), resolved when the
        trial reports. Nothing is read for it."""
        return TestRange(self)

    def stats(self) -> str:
        """Ray Data's own statistics of this worker's reads (time blocked, bytes, per operator)."""
        return str(self.shard.stats())


class Deliveries:
    """A worker's streamed batches, ready to start: start(total) -> a Delivery making that many batches."""

    def __init__(self, data: StreamShard, batch: int, seed: int, convert: Callable):
        self.data, self.batch, self.seed, self.convert = data, batch, seed, convert
        self.epochs = data.epochs
        self.delivery = None  # the Delivery start() made

    def start(self, total: int):
        from raylab.data.deliver import Delivery

        data, info = self.data, self.data.info

        def prepare(chunk: dict):
            return data.prepare(*info.split(chunk))

        def cut(xy, lo: int, hi: int):
            return self.convert(tuple(tree_map(lambda a: a[lo:hi], part) for part in xy))

        early = _early.pop("train", None)
        reader = early or train_reader(data.shard, info, self.batch)
        notify = _early.pop("notify", None)
        look = (info.targets, notify) if notify is not None and isinstance(info.targets, str) else None
        self.delivery = Delivery(
            reader, self.batch, self.seed, prepare, cut, total, split_rows=data.items, order=info.order, look=look
        )
        self.delivery.early = early is not None
        return self.delivery


_early: dict = {}  # the train split's Reader and rank 0's TestRead, started as the worker's training function starts


def train_reader(shard, info: StreamInfo, batch: int):
    """A Reader of this worker's train split, in Arrow chunks of chunk_rows(batch) rows."""
    from raylab.data.chunks import chunk_rows
    from raylab.data.deliver import PREFETCH_BATCHES, Reader

    def start_pass():
        return shard.iter_batches(
            batch_size=chunk_rows(batch), batch_format="pyarrow", prefetch_batches=PREFETCH_BATCHES
        )

    return Reader(start_pass, tuple(dict.fromkeys(info.names())))


def read_early(cfg) -> None:
    """Starts reading a streamed trial's train split the moment the worker's training function starts (before its
    framework's imports are waited on and its model is built): the first pass's start-up, seconds on a small
    machine, runs beside them. StreamShard.batches takes the reader over. On rank 0 the test split is read first
    (TestRead; StreamShard.test takes it over). Nothing for in-memory data."""
    if is_streamed(cfg):
        import ray.train

        from raylab.data.chunks import chunk_rows

        if ray.train.get_context().get_world_rank() == 0:
            _early["test"] = TestRead(
                ray.train.get_dataset_shard("test"), cfg.shared, chunk_rows(cfg.batch_per_replica)
            )
        _early["train"] = train_reader(ray.train.get_dataset_shard("train"), cfg.shared, cfg.batch_per_replica)
        if ray.train.get_context().get_world_rank() == 0:  # rank 0 says when its split looks sorted (console)
            _early["notify"] = lambda line: cfg.sink.note.remote(line)


def worker_data(cfg, world: int, rank: int, prepare: Callable) -> Any:
    """This worker's data: a StreamShard for a streamed dataset, else its MemoryShard."""
    if is_streamed(cfg):
        return StreamShard(cfg.shared, world, prepare, cfg.epochs)
    return MemoryShard(cfg.shared, world, rank, cfg.seed, prepare)


def items_per_worker(cfg, world: int) -> int:
    """Train items each worker gets per epoch (equal for every worker: shard_indices, streaming_split(equal=True))."""
    if is_streamed(cfg):
        return cfg.shared.train_items // world
    import ray

    return num_items(ray.get(cfg.shared["y_train"])) // world


def data_facts(data) -> dict:
    """What a trial records of how its input ran; `shuffle` becomes the trial's param of that name (in memory every
    framework draws a new permutation of the worker's whole shard each pass: "global")."""
    if not data.streamed:
        return {"input": "in memory (object store, seeded shard per worker)", "shuffle": "global"}
    from raylab.data.deliver import READ_AHEAD_BYTES

    return {
        "input": f"streamed (Ray Data streaming_split, Arrow chunks of 8 batches (at least 2048 rows) cut in the "
        f"worker, rows mixed in a shuffle window, {READ_AHEAD_BYTES >> 20} MB read ahead across passes)",
        "input_items_per_worker": data.items,
        "shuffle": data.shuffle,  # read when the trial reports
        "test_input": data.test_input,
    }


def stream_stats(data, rank: int) -> Callable[[], dict] | None:
    """Rank 0 of a streamed trial sends Ray Data's iterator statistics with its result (logged as an artifact)."""
    if not data.streamed or rank != 0:
        return None
    return lambda: {"ray_data_stats": data.stats()}


def evaluation(data, evaluate: Callable) -> Callable[..., dict]:
    """The loop's evaluate(items=None): over the in-memory test split (its first `items` only, where given: a --batch
    max probe's one evaluation batch), or over one pass of the streamed one."""
    if data.streamed:
        return lambda items=None: evaluate(data.test())

    def in_memory(items: int | None = None) -> dict:
        x, y = data.test()
        if items is not None:
            x, y = (tree_map(lambda a: a[:items], v) for v in (x, y))
        return evaluate(x, y)

    return in_memory
