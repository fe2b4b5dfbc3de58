"""Trial strategies, looked up by name and imported lazily.

A strategy is one module-level object behind the small interface in base.py. The driver
imports backend modules cheaply: framework imports happen inside worker functions, so a
TensorFlow trial never imports torch and vice versa.
"""

from __future__ import annotations

import importlib

from raylab.errors import UserError

# "framework:strategy" -> "module:attribute"
STRATEGIES = {
    "tf:none": "raylab.backends.tensorflow:NONE",
    "tf:mirrored": "raylab.backends.tensorflow:MIRRORED",
    "tf:mwms": "raylab.backends.tensorflow:MWMS",
    "tf:tpu": "raylab.backends.tf_tpu:TPU",
    "tf:ps": "raylab.backends.tf_ps:PS",
    "torch:none": "raylab.backends.torch:NONE",
    "torch:ddp": "raylab.backends.torch:DDP",
    "torch:ps-sync": "raylab.backends.torch_ps:SYNC",
    "torch:ps-async": "raylab.backends.torch_ps:ASYNC",
    "xla:single": "raylab.backends.xla:SINGLE",
    "xla:ddp": "raylab.backends.xla:DDP",
}


def get_strategy(kind: str):
    """The strategy object for 'framework:strategy'."""
    try:
        target = STRATEGIES[kind]
    except KeyError:
        raise UserError(f"unknown trial '{kind}'; choose from {', '.join(sorted(STRATEGIES))}.") from None
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)
