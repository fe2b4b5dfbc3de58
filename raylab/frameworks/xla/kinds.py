"""PyTorch/XLA trials through PJRT: xla:single (one process) and xla:ddp (data parallel).

All XLA and PJRT wiring lives here. Ray's own TorchXLAConfig is AWS Neuron only, so raylab
has its own backend: it sets PJRT_DEVICE on every worker before torch_xla is imported
(CPU here, TPU or CUDA where the worker holds them) and, for xla:ddp, a gloo process group.

How gradients are synchronised depends on the device (recorded as the `sync_path` tag):
- TPU / CUDA: XLA's own collectives (`xm.optimizer_step` all-reduces the gradients).
- CPU: every PJRT CPU process is its own world (`xla://` reports world size 1, an `env://`
  all_reduce silently does nothing, CPU_NUM_DEVICES + spawn deadlocks: torch-xla 2.9, checked on the
  2-core development VM), so the
  gradients are averaged across workers with gloo on CPU tensors, then applied on XLA.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass

from raylab.errors import UserError
from raylab.frameworks import cpu_threads
from raylab.frameworks.torch.process_group import ProcessGroupBackend, ProcessGroupConfig
from raylab.frameworks.xla.worker import sync_path, xla_worker_loop  # noqa: F401 - sync_path: the backend's too
from raylab.registry import Strategy, always

PJRT_FOR_DEVICE = {"cpu": "CPU", "gpu": "CUDA", "tpu": "TPU"}
RAY_RESOURCE = {"CUDA": "GPU", "TPU": "TPU"}  # the Ray resource a PJRT device needs


def pjrt_device(device: str) -> str:
    """The PJRT device for a run: $PJRT_DEVICE if the user set it, else from --device."""
    return os.environ.get("PJRT_DEVICE") or PJRT_FOR_DEVICE[device]


def worker_env(pjrt: str, threads: int) -> dict:
    """What each worker's environment needs before `import torch_xla`."""
    env = {"PJRT_DEVICE": pjrt}
    if pjrt == "CPU":
        env["CPU_NUM_DEVICES"] = "1"  # one XLA CPU device per process; more would deadlock with spawn
        env.update(cpu_threads.env(threads))  # XLA's CPU threads, as jax sets them (raylab/frameworks/cpu_threads.py)
    return env


@functools.lru_cache
def _import_error(pythonpath: str | None) -> str | None:
    """Why `import torch_xla` fails in a fresh interpreter (e.g. an undefined symbol), or None.

    A subprocess, so the driver neither pays for nor is broken by the import.
    """
    probe = subprocess.run([sys.executable, "-c", "import torch_xla"], capture_output=True, text=True, timeout=300)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["no output"])[-1][:300]


def _has_plugin(name: str) -> bool:
    """Whether a PJRT device plugin package (torch_xla's entry point group) is installed, without importing it."""
    from importlib import metadata

    return any(ep.name.lower() == name for ep in metadata.entry_points(group="torch_xla.plugins"))


def preflight(pjrt: str, cluster: dict) -> None:
    """Before any worker starts: torch_xla imports, and the cluster holds the PJRT device."""
    last = _import_error(os.environ.get("PYTHONPATH"))
    if last is not None:
        raise UserError(
            f"xla trials need torch_xla, which does not import here ({last}); "
            "install torch-xla==2.9.0 beside torch==2.9.0 (scripts/setup.sh) or drop the xla:* trials."
        )
    if pjrt not in ("CPU", "CUDA", "TPU"):
        raise UserError(f"PJRT_DEVICE={pjrt} is not supported; use CPU, CUDA or TPU.")
    if pjrt == "CUDA" and not _has_plugin("cuda"):
        raise UserError(
            "xla trials on GPU need PyTorch/XLA's CUDA plugin, which torch-xla 2.9 does not have "
            "(XLA:CUDA was deprecated in 2.8 and removed); run torch:ddp on the GPUs, or the xla "
            "trials with --device cpu or on TPU."
        )
    needed = RAY_RESOURCE.get(pjrt)
    if needed and cluster.get(needed, 0) < 1:
        raise UserError(
            f"PJRT_DEVICE={pjrt} but the Ray cluster has no {needed} resource; run on a {pjrt} node, "
            f"or unset PJRT_DEVICE / use --device cpu."
        )


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _check_device(pjrt: str) -> None:
    """On the worker: a TPU or GPU was asked for, so Ray must have assigned one."""
    import ray

    needed = RAY_RESOURCE.get(pjrt)
    if needed and not ray.get_runtime_context().get_accelerator_ids().get(needed):
        raise RuntimeError(
            f"PJRT_DEVICE={pjrt} but this worker ({os.uname().nodename}) holds no {needed}; "
            "run on a node with one or choose --device cpu."
        )


class XLABackend(ProcessGroupBackend):
    def on_start(self, worker_group, backend_config):
        env = worker_env(backend_config.pjrt, backend_config.threads)
        worker_group.execute(_check_device, pjrt=backend_config.pjrt)
        worker_group.execute(_set_env, env=env)
        super().on_start(worker_group, backend_config)  # gloo process group (used on CPU)


@dataclass
class XLAConfig(ProcessGroupConfig):
    """PJRT's device and threads on every worker, then a gloo process group; no torch import in the controller."""

    pjrt: str = "CPU"
    threads: int = 1

    @property
    def backend_cls(self):
        return XLABackend


def _xla_backend_config(device: str):
    return XLAConfig(backend="gloo", pjrt=pjrt_device(device))


def _preflight(cfg, cluster: dict) -> None:
    preflight(pjrt_device(cfg.device), cluster)


def _resources(cfg, cluster: dict) -> dict:
    """On TPU each worker (one process) takes one chip; on CUDA the launcher asks for the GPUs."""
    return {"TPU": 1} if pjrt_device(cfg.device) == "TPU" else {}


def _device(cfg) -> str:
    """The device an xla trial runs on: its PJRT device, TPU or not."""
    return "tpu" if pjrt_device(cfg.device) == "TPU" else cfg.device


def _bf16(device: str) -> str | None:
    return None if device == "tpu" else "torch_xla 2.9's autocast runs bf16 on a TPU only"


def _worker_env(backend, cfg) -> dict:
    # PJRT reads these at `import torch_xla`, which the prewarm thread starts as the process starts.
    return worker_env(backend.pjrt, backend.threads)


# torch_xla always compiles (each step is one XLA graph): --compile off and on both run it, recorded as xla.
_XLA = dict(
    executions=always("xla"),
    preflight=_preflight,
    resources=_resources,
    bf16=_bf16,
    fp16="torch_xla 2.9 has no float16 path on CPUs or TPUs (bf16 on a TPU)",
    device_of=_device,
    worker_env=_worker_env,
    cold="torch_xla cannot clear its compiled-graph cache between trials",
)
SINGLE = Strategy("xla:single", xla_worker_loop, _xla_backend_config, max_workers=1, **_XLA)
DDP = Strategy("xla:ddp", xla_worker_loop, _xla_backend_config, **_XLA)

KINDS = {"single": SINGLE, "ddp": DDP}
