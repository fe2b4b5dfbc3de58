"""JAX's plain script (raylab/frameworks/plain.py): a jitted step a careful user writes, the train state donated,
numpy batches of a shuffled permutation, running loss and metric sums kept on the device and read on log steps
(the trial's window edges, every K steps)."""

from __future__ import annotations

import time

import numpy as np

from raylab.frameworks.plain import arrays, steps_of, timed
from raylab.loop.state import windows
from raylab.timing import Chrono


def env(threads: int) -> dict:
    from raylab.frameworks.jax.kinds import thread_env

    return thread_env(threads)


def run(spec, task, x, y, xt, yt) -> dict:
    import jax

    from raylab.data import tree_map
    from raylab.frameworks.jax.task import JaxTask

    jax.config.update("jax_default_matmul_precision", "highest")  # as the trials: float32 matmuls in float32
    n = len(next(iter(arrays(x))))
    steps, batch = steps_of(spec, n), spec["batch"]
    jt = JaxTask(task, steps * spec["epochs"])
    jt.eval_batch = batch
    xs, ys = jt.inputs(x), jt.targets(y)
    test = (jt.inputs(xt), jt.targets(yt))
    state, step, forward, zeros = build(jt, spec["seed"])
    rng, order = np.random.default_rng(spec["seed"]), iter(())

    def next_batch():
        nonlocal order
        idx = next(order, None)
        if idx is None:
            order = iter(rng.permutation(n)[: n // batch * batch].reshape(-1, batch))
            idx = next(order)
        return tree_map(lambda a: a[idx], xs), tree_map(lambda a: a[idx], ys)

    evaluate = jt.evaluator(forward, lambda: (state[0], state[1]))
    chrono, epochs, start, done = Chrono(spec["start"], spec["warmup"]), [], time.time(), 0
    for epoch in range(1, spec["epochs"] + 1):
        for k in windows(steps, spec["window"], chrono.warmup, done):  # log steps: the trial's window edges
            chrono.start()
            sums = zeros()
            for _ in range(k):
                state, sums = step(state, sums, *next_batch())
            np.asarray(sums)  # the log step's read
            chrono.stop(k)
            done += k
        epochs.append({"epoch": epoch, **evaluate(*test), "elapsed_s": time.time() - start})
    return {
        **timed(chrono, batch, spec.get("trace")),
        "epochs": epochs,
        "steps_per_epoch": steps,
        "parameters": int(sum(np.prod(a.shape) for a in jax.tree.leaves(state[0]))),
        **jt.built(test[0]),
        "execution": "jit",
    }


def build(jt, seed: int):
    """(train state, jitted step(state, sums, x, y) with the state donated, forward((params, rest), x) in
    inference mode, jitted zeros() of the sums)."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from raylab.frameworks.jax.state import split

    graph, params, rest, graph_eval = split(jt.build_model(seed))
    tx = jt.build_optimizer()
    state = (params, rest, tx.init(params))
    width = 1 + 2 * len(jt.specs)

    def loss_fn(m, xb, yb):
        pred = m(xb)
        return jt.per_example_loss(yb, pred).mean(), pred

    @jax.jit
    def zeros():
        return jnp.zeros((width,), jnp.float32)

    def forward(variables, xb):
        return nnx.merge(graph_eval, *variables)(xb)

    def step(state, sums, xb, yb):
        params, rest, opt_state = state
        m = nnx.merge(graph, params, rest)
        (loss, pred), grads = nnx.value_and_grad(loss_fn, has_aux=True)(m, xb, yb)
        updates, opt_state = tx.update(grads, opt_state, params)
        new = (optax.apply_updates(params, updates), nnx.split(m, nnx.Param, ...)[2], opt_state)
        return new, sums + jt.step_stats(loss, yb, pred)

    step = jax.jit(step, donate_argnums=(0, 1))
    return state, step, forward, zeros
