"""A torch:none trial's step against the plain loop's step, in one process, no Ray: what raylab's step code costs.

Two copies of the fashion MLP (batch 32, 1 intra-op thread, Adam, the same seed) train side by side in this
process, in blocks of 6 windows of 32 steps, the blocks alternating and every other round in reverse:

- plain: the usual loop (bench/loop_cost.py plain_steps): `loss_sum += loss.detach()`, `correct += (logits.argmax(1) ==
  y).sum()`, one read per window;
- raylab: the trial's own step (raylab/frameworks/torch/worker.py train_fn: its batch source, precision context,
  running sums) and its one read per window (host_copy).

Prints the median ms per step of each (the first two blocks left out) and the ratio of their speeds. Run it
with another tree first on PYTHONPATH to measure that tree's step (e.g. a `git worktree` of an older commit):

    .venv/bin/python bench/studies/step_cost.py --rounds 16
    PYTHONPATH=/tmp/raylab-before-ba2c97c .venv/bin/python bench/studies/step_cost.py --rounds 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=16, help="blocks of each side (default: %(default)s)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path[:0] = [str(ROOT / "recipes"), str(ROOT / "bench")] + ([] if os.environ.get("PYTHONPATH") else [str(ROOT)])
    import torch

    torch.set_num_threads(1)
    import raylab
    from fashion import RECIPE
    from loop_cost import plain_steps
    from raylab.frameworks.torch.task import TorchTask, to_tensors
    from raylab.frameworks.torch.worker import host_copy, shard_batches, train_fn
    from raylab.loop.step import StepContext

    recipe = RECIPE.with_batch(32)
    ds = recipe.data()
    task, n = recipe.task(ds.target_names), len(ds.y_train)

    def built():
        torch.manual_seed(0)
        tt = TorchTask(task, 10**6)
        model = tt.build_model().train()
        opt, scheduler = tt.build_optimizer(model.parameters())
        return tt, model, opt, scheduler, to_tensors(tt.inputs(ds.x_train)), to_tensors(tt.targets(ds.y_train))

    def plain():
        tt, model, opt, scheduler, xs, ys = built()
        gen = torch.Generator().manual_seed(0)

        def order():
            while True:
                yield from torch.randperm(n, generator=gen)[: n // 32 * 32].split(32)

        batches, sums = order(), [torch.zeros(()), torch.zeros((), dtype=torch.int64)]
        return lambda k: plain_steps(k, tt, model, opt, scheduler, xs, ys, batches, sums)

    def trial():
        tt, model, opt, scheduler, xs, ys = built()
        train = train_fn(tt, model, opt, scheduler, shard_batches(xs, ys, 32, 0), StepContext())
        return lambda k: host_copy(train(k))

    sides = {"plain": plain(), "raylab": trial()}
    ms: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in list(sides) if r % 2 else list(sides)[::-1]:
            for _ in range(6):
                t0 = time.perf_counter()
                sides[name](32)
                ms[name].append((time.perf_counter() - t0) / 32 * 1e3)
    plain_ms, ours = (statistics.median(ms[k][12:]) for k in ("plain", "raylab"))
    print(f"raylab from {Path(raylab.__file__).parent.parent}: fashion MLP, batch 32, 1 thread, {args.rounds} rounds")
    print(
        f"plain {plain_ms:.4f} ms/step, raylab's step {ours:.4f} ms/step: raylab at {plain_ms / ours:.3f}x the plain "
        "loop's speed"
    )


if __name__ == "__main__":
    main()
