"""The work of one training step in TensorFlow, counted over the traced graph of the forward pass and the gradients
with TF's own per-op FLOP statistics (what `tf.compat.v1.profiler`'s float operations add up) of its matrix products
and convolutions (2 FLOPs a multiply-add). Three differences from the profiler's sum, so that the count is the work
the step does and compares with torch's and JAX's: the ops counted are those (TF also counts a few elementwise ops,
8.5% of docs/recipes.md's small regression MLP); only ops the gradients depend on count (the traced graph also
holds gradients nothing asks for, such as the first layer's input-gradient, which grappler prunes before the step
runs); and a convolution's gradient ops count from their smaller side, as torch's counter does (TF's statistic
counts every input position, the padding an unpadded convolution's gradient never multiplies included: 12% more on
the CIFAR-10 CNN). TF has no statistic for Einsum (keras.layers.MultiHeadAttention's scores and mixing): a
two-operand einsum counts 2 FLOPs for every combination of its indices' values, as torch and JAX count the same
products (an equation with an ellipsis or an unknown size counts nothing, and the parity report's comparison says
so). Tracing computes nothing."""

from __future__ import annotations

import math

CONV_GRADIENTS = ("Conv2DBackpropInput", "Conv2DBackpropFilter")
COUNTED = (
    "MatMul",
    "BatchMatMul",
    "BatchMatMulV2",
    "BatchMatMulV3",
    "Conv2D",
    "Conv3D",
    "DepthwiseConv2dNative",
    "Conv3DBackpropInputV2",
    "Conv3DBackpropFilterV2",
    "DepthwiseConv2dNativeBackpropInput",
    "DepthwiseConv2dNativeBackpropFilter",
    "Einsum",
)


def live_ops(outputs) -> list:
    """The ops the outputs depend on."""
    seen, stack = {}, [t.op for t in outputs]
    while stack:
        op = stack.pop()
        if op.name not in seen:
            seen[op.name] = op
            stack += [t.op for t in op.inputs] + list(op.control_inputs)
    return list(seen.values())


def conv_gradient_flops(op) -> int:
    """A 2-D convolution's input- or filter-gradient: its multiply-adds from the gradient's side (its positions x the
    window x the input features) or the other (the input's positions x the window x the output features), the
    smaller."""
    kh, kw, cin, cout = (op.outputs[0] if op.type == "Conv2DBackpropFilter" else op.inputs[1]).shape
    grad, other = op.inputs[2].shape, (op.inputs[0] if op.type == "Conv2DBackpropFilter" else op.outputs[0]).shape
    return 2 * kh * kw * min(math.prod(grad) * cin, math.prod(other) * cout)


def einsum_flops(op) -> int:
    """A two-operand einsum's multiply-adds, 2 FLOPs each: one for every combination of its indices' values (0 where
    the equation has an ellipsis, or a size is unknown)."""
    equation = op.get_attr("equation").decode()
    operands = equation.split("->")[0].split(",")
    if len(operands) != 2 or "." in equation:
        return 0
    sizes = {}
    for letters, tensor in zip(operands, op.inputs):
        dims = tensor.shape.as_list() if tensor.shape.rank is not None else []
        if len(dims) != len(letters) or None in dims:
            return 0
        sizes.update(zip(letters, dims))
    return 2 * math.prod(sizes.values())


def count(task, model, x, y) -> int:
    """FLOPs of the forward pass and the gradients of one training step on the batch (x, y): `model` the Keras model
    as built (its variables are read, not changed)."""
    import tensorflow as tf
    from tensorflow.python.framework import ops

    @tf.function
    def loss_and_grads(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(task.per_example_loss(y, task.float32(model(x, training=True))))
        return loss, tape.gradient(loss, model.trainable_variables)

    traced = loss_and_grads.get_concrete_function(x, y)
    total = 0
    for op in live_ops(traced.outputs):
        if op.type in CONV_GRADIENTS:
            total += conv_gradient_flops(op)
            continue
        if op.type == "Einsum":
            total += einsum_flops(op)
            continue
        if op.type not in COUNTED:
            continue
        try:
            total += ops.get_stats_for_node_def(traced.graph, op.node_def, "flops").value or 0
        except (ValueError, TypeError):  # an op with no statistic, or an unknown shape: counted as none
            continue
    return int(total)


def of(task, model):
    """flops(x, y) for the loop (raylab/loop/epochs.py Training.flops): the model's step on prepared numpy items."""
    return lambda x, y: count(task, model, x, y)


def activations_of(model):
    """activations(x) for the loop (Training.activations): the activation functions the model's forward pass runs on
    prepared numpy items (raylab/frameworks/tf/layers.py)."""
    from raylab.frameworks.tf.layers import activations

    return lambda x: activations(model, x)


def matmul(n: int, dtype: str, device: str, threads: int):
    """run(k): k products of two n x n matrices in `dtype` on `device` ("cpu", "gpu"), waited for (`raylab peak`);
    float32 in float32 (TF32 off, as the trials)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.experimental.enable_tensor_float_32_execution(False)
    kind = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}[dtype]
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        a, b = (tf.cast(tf.random.normal((n, n), seed=s), kind) for s in (1, 2))
    product = tf.function(lambda a, b: tf.matmul(a, b))

    def run(k: int) -> None:
        for _ in range(k):
            c = product(a, b)
        c.numpy()

    return run
