"""A torch module's settings for the parity report (raylab/task/model_settings.py): normalization layers, dropout
layers and the parameters as initialized (torch's layout: out, in, kernel...)."""

from __future__ import annotations

import math

NORMS = {"LayerNorm": "LayerNorm", "GroupNorm": "GroupNorm", "RMSNorm": "RMSNorm"}


def model_settings(module) -> str:
    """The trial's `model_settings` tag, read before the first step."""
    import torch
    from torch import nn

    from raylab.task.model_settings import summary

    norms, dropouts, weights = [], [], []
    for name, m in module.named_modules():
        kind = type(m).__name__
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            decay = None if m.momentum is None else 1 - m.momentum  # torch's momentum weighs the new batch
            norms.append((name, "BatchNorm", m.eps, decay))
        elif kind in NORMS:
            eps = m.eps if m.eps is not None else torch.finfo(torch.float32).eps  # RMSNorm's default
            norms.append((name, NORMS[kind], eps, None))
        elif isinstance(m, nn.modules.dropout._DropoutNd):
            dropouts.append((name, m.p))
    for name, p in module.named_parameters():
        a = p.detach().float().cpu().numpy()
        receptive = math.prod(a.shape[2:]) if a.ndim > 2 else 1
        fans = (a.shape[1] * receptive, a.shape[0] * receptive) if a.ndim >= 2 else (None, None)
        weights.append((name, a, *fans))
    return summary(norms, dropouts, weights)


# aten ops a forward pass calls -> the activation they are; gelu's form from its `approximate` argument
ACTIVATIONS = {
    "relu": "relu",
    "elu": "elu",
    "silu": "silu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "softplus": "softplus",
    "leaky_relu": "leaky relu",
    "mish": "mish",
    "hardtanh": "hardtanh",
    "erf": "gelu (exact)",  # written out: 0.5 x (1 + erf(x / sqrt 2)), as JAX and TF trace nnx.gelu and tf.nn.gelu
    "erfc": "gelu (exact)",
}


def activations(module, x) -> dict[str, int]:
    """The activation functions one forward pass in inference mode calls, counted ({"gelu (exact)": 2}), read by
    torch's dispatcher on a copy of the model on the meta device (nothing computed, the model untouched): modules and
    functions (`F.gelu`) alike."""
    import copy
    from collections import Counter

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    found: Counter = Counter()

    class Census(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__.rstrip("_")  # relu_ (in place) is relu
            if name == "gelu":
                found["gelu (tanh)" if (kwargs or {}).get("approximate") == "tanh" else "gelu (exact)"] += 1
            elif name in ACTIVATIONS:
                found[ACTIVATIONS[name]] += 1
            return func(*args, **(kwargs or {}))

    meta = copy.deepcopy(module).to("meta").eval()
    on_meta = lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t  # noqa: E731
    with torch.no_grad(), Census():
        meta(torch.utils._pytree.tree_map(on_meta, x))
    return dict(found)
