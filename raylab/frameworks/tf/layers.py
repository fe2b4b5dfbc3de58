"""A Keras model's settings for the parity report (raylab/task/model_settings.py): normalization layers, dropout
layers and the trainable weights as initialized (Keras's layout: kernel..., in, out)."""

from __future__ import annotations

import numpy as np

NORMS = {
    "LayerNormalization": "LayerNorm",
    "BatchNormalization": "BatchNorm",
    "SyncBatchNormalization": "BatchNorm",
    "GroupNormalization": "GroupNorm",
    "RMSNormalization": "RMSNorm",
}


def _layers(model) -> list:
    flatten = getattr(model, "_flatten_layers", None)  # Keras 3 and tf_keras: every nested layer, once
    if flatten is not None:
        return list(flatten(include_self=False, recursive=True))
    out = []
    for layer in getattr(model, "layers", []):
        out += [layer, *_layers(layer)]
    return out


def model_settings(model) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    from raylab.task.model_settings import fans_last, summary

    norms, dropouts, weights = [], [], []
    for layer in _layers(model):
        kind = type(layer).__name__
        if kind in NORMS:
            decay = getattr(layer, "momentum", None) if NORMS[kind] == "BatchNorm" else None
            norms.append((layer.name, NORMS[kind], float(layer.epsilon), decay))
        elif "Dropout" in kind and hasattr(layer, "rate"):
            dropouts.append((layer.name, float(layer.rate)))
    for v in model.trainable_weights:
        a = np.asarray(v.numpy(), dtype=np.float32)
        weights.append((getattr(v, "path", None) or v.name, a, *fans_last(a.shape)))
    return summary(norms, dropouts, weights)


# TF op types a forward pass runs -> the activation they are. tf.nn.gelu and tf.nn.silu are written with other ops:
# Erf or Erfc is exact GELU, a Tanh after a cube (Pow) its approximation, a Sigmoid times its own input SiLU
OPS = {
    "Relu": "relu",
    "Relu6": "relu6",
    "Elu": "elu",
    "Selu": "selu",
    "Softplus": "softplus",
    "LeakyRelu": "leaky relu",
    "Erf": "gelu (exact)",
    "Erfc": "gelu (exact)",
}
CUBED_WITHIN = 4  # producers walked back from a Tanh to find the cube of tanh-GELU


def _cubed(op) -> bool:
    todo, seen = [(op, 0)], set()
    while todo:
        o, depth = todo.pop()
        if o.type == "Pow":
            return True
        if depth < CUBED_WITHIN and o.name not in seen:
            seen.add(o.name)
            todo += [(t.op, depth + 1) for t in o.inputs]
    return False


def activations(model, x) -> dict[str, int]:
    """The activation functions one forward pass in inference mode runs, counted ({"gelu (exact)": 2}), read from
    the graph TF traces of it (nothing computed, the model untouched)."""
    from collections import Counter

    import tensorflow as tf

    graph = tf.function(lambda x: model(x, training=False)).get_concrete_function(x).graph
    found: Counter = Counter()
    for op in graph.get_operations():
        if op.type == "Tanh":
            found["gelu (tanh)" if _cubed(op) else "tanh"] += 1
        elif op.type == "Sigmoid":
            x_in = {op.inputs[0].name}  # x * sigmoid(x), or Keras' x * sigmoid(beta * x)
            if op.inputs[0].op.type == "Mul":
                x_in |= {t.name for t in op.inputs[0].op.inputs}
            times_input = any(c.type == "Mul" and x_in & {t.name for t in c.inputs} for c in op.outputs[0].consumers())
            found["silu" if times_input else "sigmoid"] += 1
        elif op.type in OPS:
            found[OPS[op.type]] += 1
    return dict(found)
