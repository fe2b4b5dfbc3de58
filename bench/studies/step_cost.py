"""A torch:none (or jax:none) trial's step against the plain loop's step, in one process, no Ray: what raylab's step
code costs.

Two copies of the fashion MLP (batch 32, 1 intra-op thread, Adam, the same seed) train side by side in this
process, in blocks of 6 windows of 32 steps, the blocks alternating and every other round in reverse:

- plain: the usual loop (bench/loop_cost.py plain_steps): `loss_sum += loss.detach()`, `correct += (logits.argmax(1) ==
  y).sum()`, one read per window;
- raylab: the trial's own step (raylab/frameworks/torch/worker.py train_fn: its batch source, precision context,
  running sums) and its one read per window (host_copy).

Prints the median ms per step of each (the first two blocks left out) and the ratio of their speeds. Run it
with another tree first on PYTHONPATH to measure that tree's step (e.g. a `git worktree` of an older commit):

    .venv/bin/python bench/studies/step_cost.py --rounds 16
    .venv/bin/python bench/studies/step_cost.py --framework jax --recipe residual_mlp --batch 64 --rounds 16

--framework jax: the plain side is JAX's plain script's step (raylab/frameworks/jax/plain.py: a jitted step, the state
donated, numpy batches of a permutation); the trial's is raylab/frameworks/jax/worker.py's train_fn with its batch
source, 1-device mesh, compile watch and first-loss keeping, read once a window as the trial reads it.
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
    p.add_argument("--framework", choices=("torch", "jax"), default="torch")
    p.add_argument("--recipe", default="fashion", help="jax: a recipe in recipes/ (default: %(default)s)")
    p.add_argument("--batch", type=int, default=32, help="jax: the batch (default: %(default)s)")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.framework == "jax":
        sides, title = jax_sides(args.recipe, args.batch), f"{args.recipe}, batch {args.batch}, 1 thread"
    else:
        sides, title = torch_sides(), "fashion MLP, batch 32, 1 thread"
    ms: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in list(sides) if r % 2 else list(sides)[::-1]:
            for _ in range(6):
                t0 = time.perf_counter()
                sides[name](32)
                ms[name].append((time.perf_counter() - t0) / 32 * 1e3)
    plain_ms, ours = (statistics.median(ms[k][12:]) for k in ("plain", "raylab"))
    import raylab

    print(f"raylab from {Path(raylab.__file__).parent.parent}: {args.framework}, {title}, {args.rounds} rounds")
    print(
        f"plain {plain_ms:.4f} ms/step, raylab's step {ours:.4f} ms/step: raylab at {plain_ms / ours:.3f}x the plain "
        "loop's speed"
    )


def torch_sides() -> dict:
    sys.path[:0] = [str(ROOT / "recipes"), str(ROOT / "bench")] + ([] if os.environ.get("PYTHONPATH") else [str(ROOT)])
    import torch

    torch.set_num_threads(1)
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

    return {"plain": plain(), "raylab": trial()}


def jax_sides(recipe_name: str, batch: int) -> dict:
    """{plain, raylab}: k -> k steps and one read of their sums, JAX's plain step and the trial's train_fn."""
    import importlib
    from types import SimpleNamespace

    sys.path[:0] = [str(ROOT / "recipes")] + ([] if os.environ.get("PYTHONPATH") else [str(ROOT)])
    from raylab.frameworks.jax.kinds import thread_env

    os.environ.update({**thread_env(1), "JAX_PLATFORMS": "cpu"})  # before jax makes its CPU client
    import jax
    import numpy as np

    from raylab.data import as_dataset, num_items, tree_map
    from raylab.frameworks.jax import plain as jax_plain
    from raylab.frameworks.jax import worker
    from raylab.frameworks.jax.compiles import watch
    from raylab.frameworks.jax.mesh import Feed, global_mesh
    from raylab.frameworks.jax.state import StateHolder
    from raylab.frameworks.jax.task import JaxTask

    jax.config.update("jax_default_matmul_precision", "highest")  # as both the trial and the plain script
    recipe = importlib.import_module(recipe_name).RECIPE.with_batch(batch)
    ds = as_dataset(recipe.data, recipe.name)
    task = recipe.task(ds.target_names)

    def jt():
        t = JaxTask(task, 10**6)
        t.eval_batch = batch
        return t

    def plain():
        t = jt()
        xs, ys = t.inputs(ds.x_train), t.targets(ds.y_train)
        n, (state, step, _, zeros) = num_items(xs), jax_plain.build(t, 0)
        rng, order, box = np.random.default_rng(0), iter(()), [state]

        def run(k: int) -> None:
            nonlocal order
            sums = zeros()
            for _ in range(k):
                idx = next(order, None)
                if idx is None:
                    order = iter(rng.permutation(n)[: n // batch * batch].reshape(-1, batch))
                    idx = next(order)
                box[0], sums = step(box[0], sums, tree_map(lambda a: a[idx], xs), tree_map(lambda a: a[idx], ys))
            np.asarray(sums)

        return run

    def trial():
        t = jt()
        feed = Feed(global_mesh("none", "cpu")[0], 1)
        data = SimpleNamespace(streamed=False, x=t.inputs(ds.x_train), y=t.targets(ds.y_train))
        batches = worker.batch_source(data, SimpleNamespace(batch_per_replica=batch, seed=0), 0, 1, 1000, feed)
        _, graph, _, _, tx, state = worker._split_model(t, 0, feed)
        train, first = worker.train_fn(t, graph, tx, StateHolder(state), batches, feed, False, watch(20))

        def run(k: int) -> None:
            sums = train(k)
            first.read({})
            np.asarray(sums.addressable_data(0))

        return run

    return {"plain": plain(), "raylab": trial()}


if __name__ == "__main__":
    main()
