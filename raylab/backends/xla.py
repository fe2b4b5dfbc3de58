"""PyTorch/XLA trials through PJRT: xla:single (one process) and xla:ddp (data parallel).

All XLA and PJRT wiring lives here. Ray's own TorchXLAConfig is AWS Neuron only, so raylab
has its own backend: it sets PJRT_DEVICE on every worker before torch_xla is imported
(CPU here, TPU or CUDA where the worker holds them) and, for xla:ddp, a gloo process group.

How gradients are synchronised depends on the device (recorded as the `sync_path` tag):
- TPU / CUDA: XLA's own collectives (`xm.optimizer_step` all-reduces the gradients).
- CPU: every PJRT CPU process is its own world (`xla://` reports world size 1, an `env://`
  all_reduce silently does nothing, CPU_NUM_DEVICES + spawn deadlocks; DESIGN.md), so the
  gradients are averaged across workers with gloo on CPU tensors, then applied on XLA.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from dataclasses import dataclass

from ray.train.backend import BackendConfig

from raylab.backends.base import Strategy
from raylab.errors import UserError

PJRT_FOR_DEVICE = {"cpu": "CPU", "gpu": "CUDA", "tpu": "TPU"}
RAY_RESOURCE = {"CUDA": "GPU", "TPU": "TPU"}  # the Ray resource a PJRT device needs


def pjrt_device(device: str) -> str:
    """The PJRT device for a run: $PJRT_DEVICE if the user set it, else from --device."""
    return os.environ.get("PJRT_DEVICE") or PJRT_FOR_DEVICE[device]


def sync_path(pjrt: str, world: int) -> str:
    if world == 1:
        return "none"
    return "gloo-cpu" if pjrt == "CPU" else "xla-collectives"


def worker_env(pjrt: str, threads: int) -> dict:
    """What each worker's environment needs before `import torch_xla`."""
    env = {"PJRT_DEVICE": pjrt}
    if pjrt == "CPU":
        env["CPU_NUM_DEVICES"] = "1"  # one XLA CPU device per process; more would deadlock with spawn
        env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}"
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
        raise UserError(f"xla trials need torch_xla, which does not import here ({last}); "
                        "install torch-xla==2.9.0 beside torch==2.9.0 (scripts/setup.sh) or drop the xla:* trials.")
    if pjrt not in ("CPU", "CUDA", "TPU"):
        raise UserError(f"PJRT_DEVICE={pjrt} is not supported; use CPU, CUDA or TPU.")
    if pjrt == "CUDA" and not _has_plugin("cuda"):
        raise UserError("xla trials on GPU need PyTorch/XLA's CUDA plugin, which torch-xla 2.9 does not have "
                        "(XLA:CUDA was deprecated in 2.8 and removed); run torch:ddp on the GPUs, or the xla "
                        "trials with --device cpu or on TPU.")
    needed = RAY_RESOURCE.get(pjrt)
    if needed and cluster.get(needed, 0) < 1:
        raise UserError(f"PJRT_DEVICE={pjrt} but the Ray cluster has no {needed} resource; run on a {pjrt} node, "
                        f"or unset PJRT_DEVICE / use --device cpu.")


def _set_env(env: dict) -> None:
    os.environ.update(env)


def _check_device(pjrt: str) -> None:
    """On the worker: a TPU or GPU was asked for, so Ray must have assigned one."""
    import ray

    needed = RAY_RESOURCE.get(pjrt)
    if needed and not ray.get_runtime_context().get_accelerator_ids().get(needed):
        raise RuntimeError(f"PJRT_DEVICE={pjrt} but this worker ({os.uname().nodename}) holds no {needed}; "
                           "run on a node with one or choose --device cpu.")


def _xla_backend_config(device: str):
    from ray.train.torch.config import TorchConfig, _TorchBackend

    class _XLABackend(_TorchBackend):
        def on_start(self, worker_group, backend_config):
            env = worker_env(backend_config.pjrt, backend_config.threads)
            worker_group.execute(_check_device, pjrt=backend_config.pjrt)
            worker_group.execute(_set_env, env=env)
            super().on_start(worker_group, backend_config)  # gloo process group (used on CPU)

    @dataclass
    class XLAConfig(TorchConfig):
        pjrt: str = "CPU"
        threads: int = 1

        @property
        def backend_cls(self):
            return _XLABackend

    return XLAConfig(backend="gloo", pjrt=pjrt_device(device))


def xla_worker_loop(config: dict) -> None:
    from raylab.timing import Phases

    phases = Phases(config["cfg"].trial_start)
    import ray.train
    import torch
    import torch.distributed as dist
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    from raylab.data import num_items, worker_shard
    from raylab.task.torch import TorchTask, to_tensors
    from raylab.worker import run_epochs

    cfg = config["cfg"]
    phases.mark("imports")
    torch.set_num_threads(cfg.threads)
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    pjrt = os.environ["PJRT_DEVICE"]
    path = sync_path(pjrt, world)
    if pjrt == "TPU":  # one process per chip (Ray set TPU_VISIBLE_CHIPS): the layout xmp.spawn would give a host
        from torch_xla._internal import tpu

        tpu.configure_topology(ctx.get_local_rank(), ctx.get_local_world_size())
    device = torch_xla.device()
    bf16 = cfg.precision == "bf16" and pjrt == "TPU"  # autocast bf16 is TPU-only in 2.9

    torch.manual_seed(cfg.seed)
    phases.mark("setup")
    x, y, x_test, y_test = worker_shard(cfg.data_refs, world, rank, cfg.seed)
    steps_per_epoch = cfg.steps(num_items(x) // cfg.batch_per_replica)
    task = TorchTask(cfg.task, steps_per_epoch * cfg.epochs, xla=True)
    next_batch = device_batches(task, x, y, cfg, rank, device)
    test = (to_tensors(task.inputs(x_test)), to_tensors(task.targets(y_test)))
    phases.mark("data")

    module = task.build_model()
    if world > 1:  # every replica starts from rank 0's weights, as DDP would
        for p in module.parameters():
            dist.broadcast(p.data, src=0)
    model = module.to(device).train()
    params = list(model.parameters())
    optimizer, scheduler = task.build_optimizer(params)
    phases.mark("model")

    def average_grads_on_cpu():
        flat = torch.cat([p.grad.flatten() for p in params]).cpu()
        dist.all_reduce(flat)
        flat /= world
        for p, chunk in zip(params, flat.split([p.numel() for p in params])):
            p.grad.copy_(chunk.view_as(p).to(device))

    compiles = CompileWatch(met, cfg.warmup_steps)

    def step():
        xb, yb = next_batch()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=bf16):
            pred = model(xb)
            per_example = task.per_example_loss(pred, yb)
        per_example.mean().backward()
        stats = task.step_stats(per_example, pred, yb)
        if path == "gloo-cpu":
            torch_xla.sync()  # materialise gradients (and stats) in one graph before leaving XLA
            average_grads_on_cpu()
            optimizer.step()
        elif path == "xla-collectives":
            xm.optimizer_step(optimizer)  # all-reduces gradients across replicas with XLA collectives
        else:
            optimizer.step()
        if scheduler is not None:
            scheduler.step()
        torch_xla.sync()
        compiles.after_step()
        return stats.cpu().tolist()

    evaluate = task.evaluator(model, device, sync=torch_xla.sync)

    def evaluate_apart():  # evaluation graphs compile too, but they are not training steps
        with compiles.eval_apart():
            return evaluate(*test)

    actual = {
        "strategy_class": "xla+gloo-allreduce" if path == "gloo-cpu" else ("xla-ddp" if world > 1 else "xla"),
        "replicas_in_sync": world,
        "local_replicas": 1,
        "device_kind": "xla:" + pjrt.lower(),
        "pjrt_device": pjrt,
        "sync_path": path,
        "precision_applied": "bf16" if bf16 else "fp32",
        "framework_version": torch.__version__,
        "torch_xla_version": torch_xla.__version__,
        "parameters": sum(p.numel() for p in params),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "recompile_steps": compiles.late_steps,  # filled in as training runs; sent at the end
        **task.built(optimizer, scheduler, test[0]),
    }

    def checksum():
        return float(sum(p.detach().cpu().double().abs().sum() for p in params))

    run_epochs(cfg, rank, steps_per_epoch, step, evaluate_apart, actual, checksum, task.results,
               extra=compiles.figures, phases=phases)


def device_batches(task, x, y, cfg, rank: int, device):
    """next_batch() -> (x, y) on the XLA device, endlessly: a drop_last DataLoader behind MpDeviceLoader
    (every step has the same shapes, so the step graph compiles once)."""
    import torch
    import torch_xla.distributed.parallel_loader as pl

    from raylab.data import num_items
    from raylab.task.torch import to_tensors

    xs, ys = to_tensors(task.inputs(x)), to_tensors(task.targets(y))

    class Rows(torch.utils.data.Dataset):  # rows of a tensor or of a dict of tensors
        def __len__(self):
            return num_items(xs)

        def __getitem__(self, i):
            return ({k: v[i] for k, v in xs.items()} if isinstance(xs, dict) else xs[i],
                    {k: v[i] for k, v in ys.items()} if isinstance(ys, dict) else ys[i])

    loader = torch.utils.data.DataLoader(Rows(), batch_size=cfg.batch_per_replica, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(cfg.seed + rank))
    device_loader, batches = pl.MpDeviceLoader(loader, device), iter(())

    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            batches = iter(device_loader)
            return next(batches)

    return next_batch


class CompileWatch:
    """XLA compilations during warm-up, after it (a training step whose graph changed), and in evaluation."""

    def __init__(self, met, warmup_steps: int):
        self.met, self.warmup_steps = met, warmup_steps
        self.steps, self.seen, self.warm, self.eval = 0, 0, (0, 0.0), (0, 0.0)
        self.late_steps: list[int] = []

    def after_step(self) -> None:
        self.steps += 1
        if self.steps == self.warmup_steps:
            self.warm = compile_snapshot(self.met)
        seen = self.met.counter_value("UncachedCompile") or 0  # a cheap counter, read every step
        if seen != self.seen:
            if self.steps > self.warmup_steps:
                self.late_steps.append(self.steps)
            self.seen = seen

    @contextlib.contextmanager
    def eval_apart(self):
        before = compile_snapshot(self.met)
        yield
        after = compile_snapshot(self.met)
        self.seen = self.met.counter_value("UncachedCompile") or 0
        self.eval = (self.eval[0] + after[0] - before[0], self.eval[1] + after[1] - before[1])

    def figures(self) -> dict:
        # Compiling during warm-up is expected; a training step compiling after it is a bug to show.
        warm, end, ev = self.warm, compile_snapshot(self.met), self.eval
        return {"compile_count_warmup": warm[0], "compile_time_warmup_s": warm[1],
                "compiles_after_warmup": end[0] - warm[0] - ev[0],
                "compile_time_after_warmup_s": end[1] - warm[1] - ev[1],
                "compile_count_eval": ev[0], "compile_time_eval_s": ev[1]}


def compile_snapshot(met) -> tuple[int, float]:
    """(number of XLA compilations, seconds spent compiling) so far in this process."""
    data = met.metric_data("CompileTime")
    return (0, 0.0) if not data else (int(data[0]), data[1] / 1e9)


def _preflight(cfg, cluster: dict) -> None:
    preflight(pjrt_device(cfg.device), cluster)


def _resources(cfg, cluster: dict) -> dict:
    """On TPU each worker (one process) takes one chip; on CUDA the launcher asks for the GPUs."""
    return {"TPU": 1} if pjrt_device(cfg.device) == "TPU" else {}


SINGLE = Strategy("xla:single", xla_worker_loop, _xla_backend_config, max_workers=1, preflight=_preflight,
                  model_family="torch", resources=_resources)
DDP = Strategy("xla:ddp", xla_worker_loop, _xla_backend_config, preflight=_preflight, model_family="torch",
               resources=_resources)
