"""One training step's work, read once after training by rank 0 on a few items of the in-memory test split: its
FLOPs by the framework's own counter (flops_per_sample) and the activation functions its forward pass calls (the
`activations` tag the parity report compares), each by the framework's folder (raylab/frameworks/<name>/flops.py,
layers.py)."""

from __future__ import annotations

import json
import time
from typing import Callable

WORK_ITEMS = 4  # test items one step's work is counted on (a sample's count does not depend on how many)
STREAMED = "a streamed trial's test split is read in batches"


def work(flops, activations, data, rank: int, counted: dict) -> Callable[[], dict] | None:
    """Rank 0's flops_per_sample and activation functions, read once after training on the first WORK_ITEMS of the
    in-memory test split (a streamed split is not read for them yet): counted["how"], the counter or why there is
    no count; counted["activations"], the tag (JSON {activation: calls}, or why they were not read)."""
    if (flops is None and activations is None) or rank != 0:
        return None

    def figures() -> dict:
        from raylab.data import tree_map

        if data.streamed:
            counted["how"] = counted["activations"] = f"not counted: {STREAMED}"
            return {}
        x, y = (tree_map(lambda a: a[:WORK_ITEMS], v) for v in data.test())
        if activations is not None:
            try:
                counted["activations"] = json.dumps(dict(sorted(activations(x).items())))
            except Exception as e:  # noqa: BLE001 - a reading is an extra: the trial stands without it
                counted["activations"] = f"not read: {type(e).__name__}: {str(e)[:200]}"
        return _flops(flops, x, y, counted) if flops is not None else {}

    return figures


def _flops(flops, x, y, counted: dict) -> dict:
    from raylab.data import num_items

    start = time.perf_counter()
    try:
        step = flops(x, y)
    except Exception as e:  # noqa: BLE001 - a count is an extra: the trial stands without it
        counted["how"] = f"not counted: {type(e).__name__}: {str(e)[:200]}"
        return {}
    if not step > 0:  # nothing the counter knows (an op it has no count for): not a figure of 0
        counted["how"] = (
            "not counted: the framework's counter found no matrix product or convolution it counts in the step"
        )
        return {}
    counted["how"] = "forward and gradients, matrix products and convolutions (frameworks' own counters)"
    return {"flops_per_sample": step / num_items(x), "flops_count_s": time.perf_counter() - start}
