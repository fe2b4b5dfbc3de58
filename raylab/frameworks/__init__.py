"""The frameworks raylab runs, one package each, and their trial kinds, looked up by name and imported lazily.

Each framework is a folder here with the same parts (raylab/frameworks/base.py PARTS): `__init__.py` holds its
`FRAMEWORK` (what raylab knows of it without importing it), `kinds.py` its trial kinds, then its task builder,
worker loop, profiler, memory reading, plain baseline and step-benchmark set-up. Adding a framework is adding a
folder with those parts and its name below. The driver imports only the `FRAMEWORK`s and `kinds.py` modules:
framework imports happen inside worker functions, so a TensorFlow trial never imports torch and vice versa.
"""

from __future__ import annotations

import functools
import importlib

from raylab.errors import UserError
from raylab.frameworks.base import Framework, Strategy

# The registry: one line per framework, its package raylab.frameworks.<name>.
NAMES = ("tf", "torch", "xla")


@functools.cache
def framework(name: str) -> Framework:
    """The FRAMEWORK of raylab.frameworks.<name>."""
    if name not in NAMES:
        raise UserError(f"unknown framework '{name}'; choose from {', '.join(NAMES)}.")
    return importlib.import_module(f"raylab.frameworks.{name}").FRAMEWORK


def frameworks() -> list[Framework]:
    return [framework(name) for name in NAMES]


def kinds() -> list[str]:
    """Every trial kind, "framework:strategy"."""
    return [f"{fw.name}:{short}" for fw in frameworks() for short in fw.kinds]


def framework_of(kind: str) -> Framework:
    return framework(kind.split(":")[0])


def get_strategy(kind: str) -> Strategy:
    """The strategy object for 'framework:strategy'."""
    name, _, short = kind.partition(":")
    if name not in NAMES or short not in framework(name).kinds:
        raise UserError(f"unknown trial '{kind}'; choose from {', '.join(sorted(kinds()))}.")
    return framework(name).part("kinds").KINDS[short]
