"""torch's process-group backend as Ray Train's controller sees it, without starting workers: the controller
unpickles a trial's backend config and runs its backend; none of that may import torch
(raylab/frameworks/torch/process_group.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What the controller does with the driver's pickled config: load it, ask its backend class, context and framework.
CONTROLLER = """
import sys, ray.cloudpickle as pickle
config = pickle.loads(sys.stdin.buffer.read())
backend = config.backend_cls()
assert backend.on_start and backend.on_shutdown and config.train_func_context and config.framework
print(type(config).__name__, config.backend, "torch" in sys.modules)
"""

# The driver pickles the config its strategy builds (ray.cloudpickle: what Ray Train sends to its controller).
DRIVER = """
import sys, ray.cloudpickle as pickle
from raylab.registry import get_strategy
sys.stdout.buffer.write(pickle.dumps(get_strategy(sys.argv[1]).backend_config(sys.argv[2])))
"""


@pytest.mark.parametrize(
    "kind,device,expected",
    [
        ("torch:ddp", "cpu", "ProcessGroupConfig gloo False"),
        ("torch:ddp", "gpu", "ProcessGroupConfig nccl False"),
        ("xla:ddp", "cpu", "XLAConfig gloo False"),
    ],
)
def test_the_controller_unpickles_a_torch_trials_backend_without_importing_torch(kind, device, expected):
    pickled = subprocess.run(
        [sys.executable, "-c", DRIVER, kind, device], capture_output=True, timeout=180, cwd=ROOT, check=True
    ).stdout
    out = subprocess.run([sys.executable, "-c", CONTROLLER], input=pickled, capture_output=True, timeout=180, cwd=ROOT)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert out.stdout.decode().split() == expected.split()
