"""torch's process group for Ray Train, set up without importing torch in the controller.

Ray Train's `TorchConfig` lives in a module that imports torch, and the config is unpickled (and its backend run)
in the run's controller: every torch and xla trial's controller imported torch (1.5 s and 470 MB more resident
memory on the 2-core VM, 2026-11-27: `import ray.train.torch.config` after `import ray.train.backend`) for a
process that never runs a tensor. `ProcessGroupConfig` does what `TorchConfig` does for raylab's trials (gloo on
the CPU, nccl on a GPU, an `env://` rendezvous at rank 0's address picked as every framework's is,
raylab/frameworks/rendezvous.py, the torchrun variables, the group torn down at the end) with every torch import
inside the functions the workers run. Those call Ray Train's own set-up functions, so the set-up stays Ray's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ray.train.backend import Backend, BackendConfig


class DeviceContext:
    """The workers' training-function context: a CUDA worker's current device is the one Ray assigned it
    (what TorchConfig's context does)."""

    def __enter__(self):
        import torch

        if torch.cuda.is_available():
            import ray.train.torch

            device = ray.train.torch.get_device()
            if device.type == "cuda":
                torch.cuda.set_device(device)

    def __exit__(self, *exc):
        return False


@dataclass
class ProcessGroupConfig(BackendConfig):
    """torch.distributed's process group on every worker: `backend` gloo or nccl, ops timing out after
    `timeout_s`."""

    backend: str = "gloo"
    timeout_s: int = 1800

    @property
    def backend_cls(self):
        return ProcessGroupBackend

    @property
    def train_func_context(self):
        return DeviceContext

    @property
    def framework(self):
        from raylab._ray import TrainingFramework

        return TrainingFramework.TORCH


class ProcessGroupBackend(Backend):
    def on_start(self, worker_group, backend_config: ProcessGroupConfig):
        from raylab.frameworks.rendezvous import rank0_address

        host, _, port = rank0_address(worker_group).rpartition(":")
        worker_group.execute(_rendezvous_env, address=host.strip("[]"), port=int(port))
        futures = [
            worker_group.execute_single_async(
                i,
                _join,
                backend=backend_config.backend,
                world_rank=i,
                world=len(worker_group),
                timeout_s=backend_config.timeout_s,
            )
            for i in range(len(worker_group))
        ]
        import ray

        ray.get(futures)

    def on_shutdown(self, worker_group, backend_config: ProcessGroupConfig):
        import ray
        from raylab._ray import ray_constants
        from ray.exceptions import GetTimeoutError
        from ray.train.constants import (
            DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
            TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S,
        )

        futures = worker_group.execute_async(_leave, destroy=len(worker_group) > 1)
        try:
            ray.get(
                futures,
                timeout=ray_constants.env_integer(
                    TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S, DEFAULT_TORCH_PROCESS_GROUP_SHUTDOWN_TIMEOUT_S
                ),
            )
        except GetTimeoutError:
            pass  # as Ray's: a worker stuck in a collective is ended with its process


def _rendezvous_env(address: str, port: int) -> None:
    """On each worker: rank 0's address, and the torchrun variables (LOCAL_RANK, RANK, WORLD_SIZE, ...)."""
    from ray.train.torch.config import _set_torch_distributed_env_vars

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = address, str(port)
    _set_torch_distributed_env_vars()


def _join(backend: str, world_rank: int, world: int, timeout_s: int) -> None:
    from ray.train.torch.config import _setup_torch_process_group

    _setup_torch_process_group(
        backend=backend, world_rank=world_rank, world_size=world, init_method="env://", timeout_s=timeout_s
    )


def _leave(destroy: bool) -> None:
    from ray.train.torch.config import _shutdown_torch

    _shutdown_torch(destroy_process_group=destroy)
