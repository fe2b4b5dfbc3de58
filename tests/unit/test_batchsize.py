"""--batch max's search (raylab/probes/batchsize.py): doubling, halving, bisecting to one item; and where it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.probes.batchsize import bisect
from raylab.errors import UserError
from raylab.task.common import test_batches as eval_batches


@pytest.mark.parametrize(
    "limit_fits,start,shard,expected",
    [
        (350, 32, 8192, (350, 351)),  # doubles to 512, bisects down to one item
        (350, 1024, 8192, (350, 351)),  # the recipe's batch does not fit: halves, then bisects
        (1, 64, 8192, (1, 2)),
        (10_000, 32, 8192, (8192, None)),  # the shard is reached: nothing ran out
        (0, 16, 8192, (0, 1)),  # not even one item
    ],
)
def test_bisect_finds_the_edge_to_one_item(limit_fits, start, shard, expected):
    tried = []

    def fits(b):
        tried.append(b)
        return b <= limit_fits

    assert bisect(fits, start, shard) == expected
    assert len(tried) == len(set(tried))  # no size twice
    assert len(tried) <= 2 * int(np.log2(max(shard, 2))) + 2


def test_batch_max_is_refused_where_it_cannot_search():
    """Refused before Ray, with a trial's other settings (raylab/settings/resolve.py)."""
    from raylab.settings import resolve
    from tests.unit.test_config import config

    def check(trials: str, streamed: bool, resume: str | None = None) -> None:
        cfg = config("--trials", trials, "--workers", "1", "--batch", "max")
        cfg.resume = resume
        resolve.check(cfg, streamed)

    with pytest.raises(UserError, match="not the parameter-server ones"):
        check("torch:none,tf:ps", streamed=False)
    with pytest.raises(UserError, match="xla:single"):
        check("xla:single", streamed=False)
    with pytest.raises(UserError, match="streamed data"):
        check("torch:none", streamed=True)
    with pytest.raises(UserError, match="--resume"):
        check("torch:none", streamed=False, resume="abc")
    check("torch:ddp,tf:mwms,tf:none,torch:none", streamed=False)


def test_evaluation_batches_hold_at_most_the_training_batch():
    x, y = np.zeros((1000, 28, 28), np.float32), np.zeros(1000)
    assert [len(b[0]) for b in eval_batches(x, y)] == [1000]
    sizes = [len(b[0]) for b in eval_batches(x, y, most=300)]
    assert sizes == [300, 300, 300, 100]


SEARCH_UNDER_A_CAP = r"""
import json, resource, sys
import torch
from raylab.probes.batchsize import bisect
from raylab.failure import out_of_memory
from raylab.loop.guard import memory_cap

ITEM_MB, CAP_HEADROOM_MB = 64, 64 * 5 + 32  # room for 5 items, and half an item to spare
data_mb = int(next(l for l in open("/proc/self/status") if l.startswith("VmData")).split()[1]) // 1024
cap, tried, kinds = data_mb + CAP_HEADROOM_MB, [], []


def fits(batch):
    tried.append(batch)
    try:
        with memory_cap(cap):
            x = torch.ones(batch, ITEM_MB << 18)  # a real allocation: batch * 64 MB of float32, written
            y = x * 2  # and a step's worth of a second one
        del x, y
        return True
    except BaseException as e:  # noqa: BLE001 - what the probe would see
        kinds.append((type(e).__name__, out_of_memory(e)))
        return False


print(json.dumps({"edge": bisect(fits, 1, 1024), "tried": tried, "kinds": kinds}))
"""


def test_the_search_finds_the_edge_of_a_real_allocator_failure_in_one_process():
    """The search against torch's own allocator under raylab's RLIMIT_DATA cap, in one process: each size a real
    allocation of two 64 MB tensors per item; room for 5 items' first tensor, so 2 of both fit and 3 do not.
    Every failure is torch's "can't allocate memory", which raylab names out of host memory."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", SEARCH_UNDER_A_CAP], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["edge"] == [2, 3], out  # 2 x 2 x 64 MB fit in 352 MB of room; 3 x 2 x 64 MB do not
    assert out["tried"] == [1, 2, 4, 3], out  # doubling to the first failure, then bisecting to one item
    assert out["kinds"] and all(kind == "host" for _, kind in out["kinds"]), out
