"""The work of one training step in JAX, counted from jax's own trace of it (`jax.make_jaxpr`): every matrix product
(`dot_general`) and convolution (`conv_general_dilated`) of the forward pass and of the gradients, the way torch's
FLOP counter counts them (2 FLOPs a multiply-add; a convolution's every output position times its whole window,
padding included; the gradients of a convolution as much as its forward pass). Tracing computes nothing. XLA's own
cost analysis (`.lower().compile().cost_analysis()`) is not used: it counts a padded convolution's real taps only
(the fashion CNN's step: 381 MFLOP a sample against 493 in torch, TF and here), adds every elementwise op, and
compiles the step once more."""

from __future__ import annotations

import math


def dot_flops(eqn) -> int:
    lhs = eqn.invars[0].aval.shape
    (contract, _), _ = eqn.params["dimension_numbers"]
    return 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[d] for d in contract)


def conv_flops(eqn) -> int:
    """A convolution's multiply-adds counted from its smaller side: its output positions x the kernel's window x its
    input features (less the window's taps on a dilated input's holes), or its input positions x the window x its
    output features. A forward convolution's is the first (its output, a padded one included), the input-gradient of
    an unpadded or strided one the second (jax writes it as a convolution over the padded, dilated gradient): as
    torch's counter counts both."""
    lhs, rhs, out = (v.aval.shape for v in (*eqn.invars[:2], eqn.outvars[0]))
    dims = eqn.params["dimension_numbers"]
    window = math.prod(rhs[d] for d in dims.rhs_spec[2:])
    groups = eqn.params.get("feature_group_count", 1) * eqn.params.get("batch_group_count", 1)
    # a dilated input's holes meet the window and multiply nothing (a transposed convolution, a strided one's gradients)
    from_out = math.prod(out) * window * rhs[dims.rhs_spec[1]] // math.prod(eqn.params.get("lhs_dilation", (1,)))
    from_in = math.prod(lhs) * window * rhs[dims.rhs_spec[0]] // groups
    return 2 * min(from_out, from_in)


COUNTED = {"dot_general": dot_flops, "conv_general_dilated": conv_flops}


def jaxpr_flops(jaxpr) -> int:
    """Matrix products and convolutions of a (closed) jaxpr, its inner jaxprs included (a scan's body times its
    length; a cond's costliest branch)."""
    total = 0
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        count = COUNTED.get(eqn.primitive.name)
        if count is not None:
            total += count(eqn)
            continue
        inner = [jaxpr_flops(v) for v in eqn.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
        branches = [jaxpr_flops(b) for b in eqn.params.get("branches", ())]
        times = eqn.params.get("length", 1) if eqn.primitive.name == "scan" else 1
        total += times * sum(inner) + (max(branches) if branches else 0)
    return total


def count(task, model, x, y) -> int:
    """FLOPs of the forward pass and the gradients of one training step on the batch (x, y): `model` an NNX module in
    training mode (traced, not run: its state is not changed)."""
    import jax
    from flax import nnx

    graph, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_and_grads(params, rest, x, y):
        def loss(module):
            return task.per_example_loss(y, module(x)).mean()

        return nnx.value_and_grad(loss)(nnx.merge(graph, params, rest))

    return jaxpr_flops(jax.make_jaxpr(loss_and_grads)(params, rest, x, y))


def of(task, graph, holder):
    """flops(x, y) for the loop (raylab/loop/epochs.py Training.flops): the step of the model as it trains (its graph
    and the state the holder keeps) on prepared numpy items."""

    def flops(x, y) -> int:
        from flax import nnx

        params, rest, _ = holder.state
        return count(task, nnx.merge(graph, params, rest), x, y)

    return flops


def activations_of(graph, holder):
    """activations(x) for the loop (Training.activations): the activation functions the model's forward pass calls
    on prepared numpy items (raylab/frameworks/jax/layers.py)."""

    def activations(x) -> dict:
        from flax import nnx

        from raylab.frameworks.jax.layers import activations

        params, rest, _ = holder.state
        return activations(nnx.merge(graph, params, rest), x)

    return activations


def matmul(n: int, dtype: str, device: str, threads: int):
    """run(k): k jitted products of two n x n matrices in `dtype` on `device` ("cpu", "gpu"), waited for (`raylab
    peak`); float32 at the "highest" matmul precision, as the trials. Threads: the process's environment
    (raylab/frameworks/jax/plain.py env)."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_default_matmul_precision", "highest")
    where = jax.devices("gpu" if device == "gpu" else "cpu")[0]
    kind = {"fp32": jnp.float32, "bf16": jnp.bfloat16, "fp16": jnp.float16}[dtype]
    keys = jax.random.split(jax.random.key(0))
    a, b = (jax.device_put(jax.random.normal(key, (n, n)).astype(kind), where) for key in keys)
    product = jax.jit(lambda a, b: a @ b)

    def run(k: int) -> None:
        for _ in range(k):
            c = product(a, b)
        c.block_until_ready()

    return run
