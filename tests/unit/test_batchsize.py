"""--batch max's search (raylab/batchsize.py): doubling, halving, bisecting to one item; and where it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.batchsize import bisect, check
from raylab.errors import UserError
from raylab.task.common import test_batches as eval_batches


@pytest.mark.parametrize("limit_fits,start,shard,expected", [
    (350, 32, 8192, (350, 351)),  # doubles to 512, bisects down to one item
    (350, 1024, 8192, (350, 351)),  # the recipe's batch does not fit: halves, then bisects
    (1, 64, 8192, (1, 2)),
    (10_000, 32, 8192, (8192, None)),  # the shard is reached: nothing ran out
    (0, 16, 8192, (0, 1)),  # not even one item
])
def test_bisect_finds_the_edge_to_one_item(limit_fits, start, shard, expected):
    tried = []

    def fits(b):
        tried.append(b)
        return b <= limit_fits

    assert bisect(fits, start, shard) == expected
    assert len(tried) == len(set(tried))  # no size twice
    assert len(tried) <= 2 * int(np.log2(max(shard, 2))) + 2


def test_batch_max_is_refused_where_it_cannot_search():
    with pytest.raises(UserError, match="not the parameter-server ones"):
        check(["torch:none", "tf:ps"], streamed=False)
    with pytest.raises(UserError, match="xla:single"):
        check(["xla:single"], streamed=False)
    with pytest.raises(UserError, match="streamed data"):
        check(["torch:none"], streamed=True)
    with pytest.raises(UserError, match="--resume"):
        check(["torch:none"], streamed=False, resume="abc")
    check(["torch:ddp", "tf:mwms", "tf:none", "torch:none"], streamed=False)


def test_evaluation_batches_hold_at_most_the_training_batch():
    x, y = np.zeros((1000, 28, 28), np.float32), np.zeros(1000)
    assert [len(b[0]) for b in eval_batches(x, y)] == [1000]
    sizes = [len(b[0]) for b in eval_batches(x, y, most=300)]
    assert sizes == [300, 300, 300, 100]
