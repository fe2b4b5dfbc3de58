"""PyTorch's trial kinds: one plain process (torch:none), DistributedDataParallel (torch:ddp) and parameter
servers on Ray actors (torch:ps-sync, torch:ps-async: raylab/frameworks/torch/ps.py).

The process group for DDP is Ray Train's, set up through ProcessGroupConfig (raylab/frameworks/torch/process_group.py:
TorchConfig's set-up without importing torch in the run's controller): gloo on CPU, nccl on GPU.
torch:none is the analogue of tf:none: the same loop with no process group and no DDP wrapper (in a warm group
beside a 1-worker torch:ddp, its processes have that kind's process group of one rank, which it never calls:
raylab/driver/groups.py). It exists because DDP costs about 1 ms per step even with one rank here (gloo all-reduce
plus bucket copies), and a 1-worker `torch:ddp` that silently dropped DDP would be recorded as something that did
not run.
"""

from __future__ import annotations

from ray.train.backend import BackendConfig

from raylab.frameworks.torch.process_group import ProcessGroupConfig
from raylab.frameworks.torch.ps import GroupConfig, torch_ps_loop
from raylab.frameworks.torch.worker import torch_worker_loop
from raylab.registry import PS_NO_BF16, Strategy


def _backend_config(device: str):
    return ProcessGroupConfig(backend="nccl" if device == "gpu" else "gloo")


def _execution_check(label: str, device: str) -> str | None:
    if label.endswith(":reduce-overhead") and device != "gpu":
        return (
            "--compile-mode reduce-overhead is CUDA graphs, which run on a GPU only; use --compile-mode default "
            "or max-autotune on a CPU"
        )
    return None


# --compile: eager, or torch.compile (Inductor) of the model's forward pass and the loss, in one of its modes
# (raylab/frameworks/torch/compiled.py)
_COMPILE = dict(
    executions={
        "off": "eager",
        "on": "inductor",
        "on:reduce-overhead": "inductor:reduce-overhead",
        "on:max-autotune": "inductor:max-autotune",
    },
    execution_check=_execution_check,
)
NONE = Strategy(
    "torch:none",
    torch_worker_loop,
    lambda device: BackendConfig(),
    max_workers=1,
    batch_search=True,
    fp16=None,
    warm_with="torch:ddp",
    **_COMPILE,
)
DDP = Strategy("torch:ddp", torch_worker_loop, _backend_config, batch_search=True, fp16=None, **_COMPILE)
_PS = dict(
    ps_roles="hosts",
    bf16=PS_NO_BF16,
    fp16=PS_NO_BF16,
    **_COMPILE,
    cold="its parameter servers live as long as their worker group",
)
SYNC = Strategy("torch:ps-sync", torch_ps_loop, lambda device: GroupConfig(), **_PS)
ASYNC = Strategy("torch:ps-async", torch_ps_loop, lambda device: GroupConfig(), **_PS)

KINDS = {"none": NONE, "ddp": DDP, "ps-sync": SYNC, "ps-async": ASYNC}
