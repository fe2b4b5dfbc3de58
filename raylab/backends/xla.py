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
    import torch_xla.distributed.parallel_loader as pl

    from raylab.data import worker_shard
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
    data = torch.utils.data.TensorDataset(torch.from_numpy(x.astype("float32") / 255.0),
                                          torch.from_numpy(y.astype("int64")))
    # drop_last: every step has the same shapes, so the step graph compiles once.
    loader = torch.utils.data.DataLoader(data, batch_size=cfg.batch_per_replica, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(cfg.seed + rank))
    device_loader = pl.MpDeviceLoader(loader, device)
    steps_per_epoch = len(loader)
    phases.mark("data")

    module = cfg.build_model()
    if world > 1:  # every replica starts from rank 0's weights, as DDP would
        for p in module.parameters():
            dist.broadcast(p.data, src=0)
    model = module.to(device).train()
    params = list(model.parameters())
    # capturable: Adam keeps its step count and bias corrections on the device. Computed on the host
    # (the default) they reach XLA as new scalars every step, and at the steps where one rounds, in
    # float32, to another scalar of the graph (6212 and 16628 for this MLP) the step compiles again
    # (bench/xla_recompiles.py). raylab/plain.py's xla loop does the same.
    optimizer = torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_epsilon, capturable=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    phases.mark("model")
    batches = iter(())

    def next_batch():
        nonlocal batches
        try:
            return next(batches)
        except StopIteration:
            batches = iter(device_loader)
            return next(batches)

    def average_grads_on_cpu():
        flat = torch.cat([p.grad.flatten() for p in params]).cpu()
        dist.all_reduce(flat)
        flat /= world
        for p, chunk in zip(params, flat.split([p.numel() for p in params])):
            p.grad.copy_(chunk.view_as(p).to(device))

    compiles = {"steps": 0, "eval": (0, 0.0), "seen": 0, "late_steps": []}

    def step():
        xb, yb = next_batch()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("xla", dtype=torch.bfloat16, enabled=bf16):
            logits = model(xb)
            loss = loss_fn(logits, yb)
        loss.backward()
        stats = torch.stack([loss.detach().float(), (logits.argmax(1) == yb).sum().float()])
        if path == "gloo-cpu":
            torch_xla.sync()  # materialise gradients (and stats) in one graph before leaving XLA
            average_grads_on_cpu()
            optimizer.step()
        elif path == "xla-collectives":
            xm.optimizer_step(optimizer)  # all-reduces gradients across replicas with XLA collectives
        else:
            optimizer.step()
        torch_xla.sync()
        compiles["steps"] += 1
        if compiles["steps"] == cfg.warmup_steps:
            compiles["warmup"] = compile_snapshot(met)
        seen = met.counter_value("UncachedCompile") or 0  # a cheap counter, read every step
        if seen != compiles["seen"]:
            if compiles["steps"] > cfg.warmup_steps:
                compiles["late_steps"].append(compiles["steps"])
            compiles["seen"] = seen
        loss_value, correct = stats.cpu().tolist()
        return loss_value, correct

    test_x = torch.from_numpy(x_test.astype("float32") / 255.0)
    test_y = torch.from_numpy(y_test.astype("int64"))

    @torch.no_grad()
    def evaluate():
        before = compile_snapshot(met)
        model.eval()
        loss = correct = 0.0
        for xb, yb in zip(test_x.split(1000), test_y.split(1000)):
            logits = model(xb.to(device)).cpu()
            loss += float(torch.nn.functional.cross_entropy(logits, yb, reduction="sum"))
            correct += float((logits.argmax(1) == yb).sum())
        model.train()
        after = compile_snapshot(met)  # evaluation graphs compile too, but they are not training steps
        compiles["seen"] = met.counter_value("UncachedCompile") or 0
        compiles["eval"] = (compiles["eval"][0] + after[0] - before[0], compiles["eval"][1] + after[1] - before[1])
        return loss / len(test_x), correct / len(test_x)

    def compile_figures() -> dict:
        # Compiling during warm-up is expected; a training step compiling after it is a bug to show.
        warm, end, ev = compiles.get("warmup", (0, 0.0)), compile_snapshot(met), compiles["eval"]
        return {"compile_count_warmup": warm[0], "compile_time_warmup_s": warm[1],
                "compiles_after_warmup": end[0] - warm[0] - ev[0],
                "compile_time_after_warmup_s": end[1] - warm[1] - ev[1],
                "compile_count_eval": ev[0], "compile_time_eval_s": ev[1]}

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
        "recompile_steps": compiles["late_steps"],  # filled in as training runs; sent at the end
    }

    def checksum():
        return float(sum(p.detach().cpu().double().abs().sum() for p in params))

    run_epochs(cfg, rank, steps_per_epoch, step, evaluate, actual, checksum, extra=compile_figures, phases=phases)


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
