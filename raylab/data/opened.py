"""A Stream opened on the driver once Ray is up: its two lazy Ray Data datasets, counted where the stream does not
say its size, and what each worker is told of them (StreamInfo)."""

from __future__ import annotations

from dataclasses import dataclass

from raylab.data.files import SPLIT_NAMES
from raylab.data.stream import Stream, StreamInfo
from raylab.errors import UserError


@dataclass
class Streamed:
    """A stream on the driver once Ray is up: the two lazy datasets, their sizes and what workers get."""

    stream: Stream
    datasets: dict  # {"train": Dataset, "test": Dataset}
    info: StreamInfo

    @property
    def name(self) -> str:
        return self.stream.name


def open_stream(stream: Stream, quick: tuple[int, int] | None = None, seed: int = 0) -> Streamed:
    """The stream's datasets, counted where the stream does not say its size (Parquet: from file metadata); `seed`
    seeds the train split's order of files or blocks, a new one every pass."""
    import logging

    limits = dict(zip(SPLIT_NAMES, quick or (None, None)))
    # Ray Data's INFO lines on the driver (the Parquet reader's size estimates, a count's execution plan) are not
    # raylab's to print: the terminal shows raylab's lines only
    quiet, level = logging.getLogger("ray.data"), logging.getLogger("ray.data").level
    quiet.setLevel(logging.WARNING)
    try:
        datasets = {s: stream.dataset(s, limits[s], seed) for s in SPLIT_NAMES}
        sizes = {"train": stream.train_items, "test": stream.test_items}
        for split, n in sizes.items():
            if n is None:
                n = stream.dataset(split).count()
            sizes[split] = min(n, limits[split]) if limits[split] else n
    finally:
        quiet.setLevel(level)
    if sizes["train"] == 0 or sizes["test"] == 0:
        raise UserError(
            f"{stream.name}: the streamed {'train' if not sizes['train'] else 'test'} split is empty ({stream.source})."
        )
    return Streamed(
        stream, datasets, StreamInfo(stream.inputs, stream.targets, sizes["train"], sizes["test"], stream.order)
    )
