"""raylab.loop.builtins_only: what rank 0 reports unpickles without importing any framework."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np

from raylab.loop import builtins_only


class Version(str):
    """Stands for torch's TorchVersion: a str subclass whose pickle names its module."""


def kinds(value):
    if isinstance(value, dict):
        return set().union(*(kinds(v) for v in value.values())) | {type(k) for k in value}
    if isinstance(value, list):
        return set().union(set(), *(kinds(v) for v in value))
    return {type(value)}


def test_framework_objects_become_builtins():
    fields = {
        "framework_version": Version("2.9.0"),
        "loss": np.float32(0.5),
        "steps": np.int64(3),
        "synced": np.bool_(True),
        "sizes": (1, np.float64(2.0)),
        "weights": np.zeros(2),
        "none": None,
        "actual": {"dtype": np.dtype("float32"), "ok": "yes"},
    }
    out = builtins_only(fields)
    assert out == {
        "framework_version": "2.9.0",
        "loss": 0.5,
        "steps": 3,
        "synced": True,
        "sizes": [1, 2.0],
        "weights": [0.0, 0.0],
        "none": None,
        "actual": {"dtype": "float32", "ok": "yes"},
    }
    assert kinds(out) <= {str, float, int, bool, type(None)}


def test_real_torch_version_pickles_without_torch():
    """The case that cost seconds per trial: torch.__version__ made the sink and the driver import torch."""
    import torch

    blob = pickle.dumps(builtins_only({"framework_version": torch.__version__}))
    probe = "import pickle, sys; pickle.loads(sys.stdin.buffer.read()); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], input=blob, capture_output=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == b"False", out.stderr
