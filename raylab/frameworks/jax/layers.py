"""A Flax NNX module's settings for the parity report (raylab/task/model_settings.py): normalization layers,
dropout layers and the parameters (`nnx.Param`) as initialized (Flax's layout: kernel..., in, out)."""

from __future__ import annotations

import numpy as np

NORMS = {"LayerNorm": "LayerNorm", "BatchNorm": "BatchNorm", "GroupNorm": "GroupNorm", "RMSNorm": "RMSNorm"}


def _name(path) -> str:
    return ".".join(map(str, path))


def model_settings(model) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    from flax import nnx

    from raylab.task.model_settings import fans_last, summary

    norms, dropouts, weights = [], [], []
    for path, m in nnx.iter_modules(model):
        kind = type(m).__name__
        if kind in NORMS:
            decay = getattr(m, "momentum", None) if NORMS[kind] == "BatchNorm" else None
            norms.append((_name(path), NORMS[kind], float(m.epsilon), decay))
        elif isinstance(m, nnx.Dropout):
            dropouts.append((_name(path), float(m.rate)))
    for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        a = np.asarray(v.get_value(), dtype=np.float32)
        weights.append((_name(path), a, *fans_last(a.shape)))
    return summary(norms, dropouts, weights)


# jax.nn's activations that stay named in a trace (jitted functions); gelu and silu are inlined, so their primitives
# tell them: erf or erfc is exact GELU, tanh after a cube its approximation, logistic times its own input SiLU
NAMED = {"relu", "relu6", "elu", "selu", "celu", "silu", "swish", "sigmoid", "softplus", "leaky_relu", "mish", "gelu"}
RENAMED = {"swish": "silu", "leaky_relu": "leaky relu"}
CUBED_WITHIN = 4  # producers walked back from a tanh to find the cube of tanh-GELU


def _census(jaxpr, found) -> None:
    made = {v: e for e in jaxpr.eqns for v in e.outvars}  # var -> the eqn that produced it
    for eqn in jaxpr.eqns:
        kind = eqn.primitive.name
        name = eqn.params.get("name") if kind in ("pjit", "jit") else None
        if name in NAMED:
            if name in ("gelu", "silu", "swish"):  # a named one holds the primitives below
                _census(eqn.params["jaxpr"].jaxpr, found)
            else:
                found[RENAMED.get(name, name)] += 1
            continue
        if kind in ("erf", "erfc"):
            found["gelu (exact)"] += 1
        elif kind == "tanh":
            found["gelu (tanh)" if _cubed(eqn, made) else "tanh"] += 1
        elif kind == "logistic":
            users = [e for e in jaxpr.eqns if e.primitive.name == "mul" and any(v is eqn.outvars[0] for v in e.invars)]
            found["silu" if any(v is eqn.invars[0] for e in users for v in e.invars) else "sigmoid"] += 1
        for sub in _subjaxprs(eqn):
            _census(sub, found)


def _cubed(eqn, made) -> bool:
    todo, seen = [(eqn, 0)], set()
    while todo:
        e, depth = todo.pop()
        if e.primitive.name == "integer_pow" and e.params.get("y") == 3:
            return True
        if depth < CUBED_WITHIN and id(e) not in seen:
            seen.add(id(e))
            todo += [(made[v], depth + 1) for v in e.invars if _var(v) and v in made]
    return False


def _var(v) -> bool:
    return not hasattr(v, "val")  # a Literal (a constant) is no variable and has no producer


def _subjaxprs(eqn):
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else [value]:
            inner = getattr(v, "jaxpr", v)  # a ClosedJaxpr's jaxpr, or a Jaxpr
            if hasattr(inner, "eqns"):
                yield inner


def activations(model, x) -> dict[str, int]:
    """The activation functions one forward pass in inference mode calls, counted ({"gelu (exact)": 2}), read from
    jax's trace of it (`jax.make_jaxpr`: nothing computed, the model untouched)."""
    from collections import Counter

    import jax
    from flax import nnx

    graph, state = nnx.split(model)

    def forward(state, x):
        module = nnx.merge(graph, state)
        module.eval()
        return module(x)

    found: Counter = Counter()
    _census(jax.make_jaxpr(forward)(state, x).jaxpr, found)
    return dict(found)
