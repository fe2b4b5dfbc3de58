"""The xla:* worker loop: PJRT device, data through MpDeviceLoader, one step graph, compilations counted.

raylab/frameworks/xla/kinds.py wires PJRT and the process group (the backend); this is what each worker runs.
"""

from __future__ import annotations

import os


def sync_path(pjrt: str, world: int) -> str:
    """How gradients are synchronised: none (one worker), gloo on the host (CPU), XLA collectives (TPU)."""
    if world == 1:
        return "none"
    return "gloo-cpu" if pjrt == "CPU" else "xla-collectives"


def xla_worker_loop(config: dict) -> None:
    """A torch_xla trial's worker: torch's start and data (torch/worker.py), the XLA device, the shared loop."""
    from raylab.frameworks.torch.state import param_checksum
    from raylab.frameworks.torch.worker import shard_and_task, torch_imports
    from raylab.loop.start import start

    cfg, phases, ctx, _ = start(config, torch_imports)
    import torch_xla
    import torch_xla.debug.metrics as met

    from raylab.frameworks.xla import flops
    from raylab.loop import Training, run_epochs
    from raylab.loop.compiles import CompileWatch

    phases.mark("imports")
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    pjrt = os.environ["PJRT_DEVICE"]
    path = sync_path(pjrt, world)
    device = _device(pjrt, ctx)
    step = _step_context(cfg, pjrt)
    phases.mark("setup")
    task, steps_per_epoch, data = shard_and_task(cfg, ctx, xla=True)
    batches = device_batches(data, cfg, rank, device, steps_per_epoch)
    phases.mark("data")

    model = _model(task, world, device)
    optimizer, scheduler = task.build_optimizer(list(model.parameters()))
    phases.mark("model")

    compiles = CompileWatch(
        lambda: compile_snapshot(met), cfg.warmup_steps, count=lambda: met.counter_value("UncachedCompile") or 0
    )  # a cheap counter, read every step
    train = xla_train(task, model, optimizer, scheduler, batches, path, step, compiles, device)

    actual = _actual(cfg, pjrt, path, world, model, step, compiles, task, optimizer, scheduler, data)
    training = Training(
        steps_per_epoch,
        train,
        compiles.apart(task.evaluator(model, device, sync=torch_xla.sync)),
        task.results,
        actual,
        lambda: param_checksum(model),
        read=lambda sums: sums.double().cpu().numpy(),
        batches=batches,
        step=step,
        syncs=lambda: device_reads(met),
        extra=compiles.figures,
        phases=phases,
        data=data,
        flops=flops.of(task, model),
        activations=flops.activations_of(model),
        saver=xla_saver(model, optimizer, scheduler, device, rank),
    )
    run_epochs(cfg, rank, training)


def _step_context(cfg, pjrt: str):
    """The step's context: autocast bf16 where asked on a TPU (torch_xla 2.9's autocast is TPU-only), the profiler."""
    import torch

    from raylab.frameworks.xla.profile import capture
    from raylab.loop import StepContext

    profile = capture(False) if cfg.profile else None
    if cfg.precision == "bf16" and pjrt == "TPU":
        return StepContext("bf16", autocast=lambda: torch.autocast("xla", dtype=torch.bfloat16), profile=profile)
    return StepContext(profile=profile)


def _model(task, world: int, device):
    """The recipe's model on the XLA device, in training mode; every replica starts from rank 0's weights, as DDP."""
    import torch.distributed as dist

    module = task.build_model()
    if world > 1:
        for p in module.parameters():
            dist.broadcast(p.data, src=0)
    return module.to(device).train()


def _actual(cfg, pjrt: str, path: str, world: int, model, step, compiles, task, optimizer, scheduler, data) -> dict:
    """What rank 0 says ran: the XLA device, how its replicas sync, the precision applied."""
    import torch_xla

    from raylab.frameworks import cpu_threads
    from raylab.frameworks.torch.worker import torch_facts

    return {
        "strategy_class": "xla+gloo-allreduce" if path == "gloo-cpu" else ("xla-ddp" if world > 1 else "xla"),
        "replicas_in_sync": world,
        "device_kind": "xla:" + pjrt.lower(),
        "pjrt_device": pjrt,
        **device_name(pjrt),
        "sync_path": path,
        **(cpu_threads.recorded() if pjrt == "CPU" else {}),
        **torch_facts(model),
        "precision_applied": step.precision,
        "torch_xla_version": torch_xla.__version__,
        "execution": cfg.execution,
        "recompile_steps": compiles.late_steps,  # filled in as training runs; sent at the end
        **task.built(optimizer, scheduler, data.sample()),
    }


def xla_saver(model, optimizer, scheduler, device, rank: int):
    """Checkpoints through torch_xla's own save path: xm.save moves the state dicts (model, optimizer, schedule)
    off the device and writes them on the master ordinal, with the host RNG state and every rank's XLA RNG
    seed (dropout): the ranks' seeds differ (rank 0 alone evaluates, and every graph it runs moves its seed
    on), so each is gathered and each rank gets its own back. Every rank calls save (xm.save ends in a
    rendezvous); rank 0's directory is the checkpoint, and every rank loads it (the replicas hold the same
    weights), the tensors going back to the device through load_state_dict."""
    import torch
    import torch.distributed as dist
    import torch_xla.core.xla_model as xm

    from raylab.loop import Saver

    def save(directory: str, _rank: int) -> None:
        seeds = [xm.get_rng_state(device)]
        if dist.is_initialized() and dist.get_world_size() > 1:
            seeds = [None] * dist.get_world_size()
            dist.all_gather_object(seeds, xm.get_rng_state(device))
        xm.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict() if scheduler is not None else None,
                "rng": torch.get_rng_state(),
                "xla_rng": seeds,
            },
            f"{directory}/xla.pt",
            master_only=True,
            global_master=True,
        )

    def load(directory: str) -> None:
        state = torch.load(f"{directory}/xla.pt", map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        seeds = state["xla_rng"]
        xm.set_rng_state(int(seeds[rank] if rank < len(seeds) else seeds[0]), device)

    return Saver(save, load)


def device_batches(data, cfg, rank: int, device, steps_per_epoch: int):
    """A batch source of (x, y) on the XLA device, endlessly. In memory: the same shuffled index batches as the
    torch trials (raylab/frameworks/torch/worker.py shuffled_batches, seeded per rank: whole batches only, so every step
    has the same shapes and the step graph compiles once) through a DataLoader behind MpDeviceLoader, restartable
    after a checkpoint's steps. Streamed: a split's whole batches, made tensors on the delivery's cutter thread
    (raylab/data/deliver.py) and moved to the device as the step takes them."""
    import torch
    import torch_xla.distributed.parallel_loader as pl

    from raylab.data import num_items
    from raylab.frameworks.torch.task import to_tensors
    from raylab.frameworks.torch.worker import shuffled_batches
    from raylab.loop import Batches, StreamBatches

    if data.streamed:
        epoch = data.batches(
            cfg.batch_per_replica, cfg.seed + rank, convert=lambda xy: (to_tensors(xy[0]), to_tensors(xy[1]))
        )
        return StreamBatches(epoch, steps_per_epoch, lambda xy: (to_tensors(xy[0], device), to_tensors(xy[1], device)))
    xs, ys = to_tensors(data.x), to_tensors(data.y)  # prepared (numpy) by the task
    n = num_items(xs)

    class Rows(torch.utils.data.Dataset):  # rows of a tensor or of a dict of tensors
        def __len__(self):
            return n

        def __getitem__(self, i):
            return (
                {k: v[i] for k, v in xs.items()} if isinstance(xs, dict) else xs[i],
                {k: v[i] for k, v in ys.items()} if isinstance(ys, dict) else ys[i],
            )

    class Order:  # the batch sampler: index batches from the trial's `done`-th on, endlessly
        def __init__(self, done: int):
            self.done = done

        def __iter__(self):
            generator = torch.Generator().manual_seed(cfg.seed + rank)
            return (idx.tolist() for idx in shuffled_batches(n, cfg.batch_per_replica, generator, start=self.done))

    def start(done: int):
        loader = torch.utils.data.DataLoader(Rows(), batch_sampler=Order(done))
        yield from pl.MpDeviceLoader(loader, device)

    return Batches(start)


def _device(pjrt: str, ctx):
    import torch_xla

    if pjrt == "TPU":  # one process per chip (Ray set TPU_VISIBLE_CHIPS): the layout xmp.spawn would give a host
        from torch_xla._internal import tpu

        tpu.configure_topology(ctx.get_local_rank(), ctx.get_local_world_size())
    return torch_xla.device()


def xla_train(task, model, optimizer, scheduler, batches, path: str, context, compiles, device):
    """train(k) -> [loss, metric sums...] of k updates, summed on the device and not read: each step is one
    graph (cut by torch_xla.sync()), gradients synchronised the way `path` says."""
    import torch
    import torch.distributed as dist
    import torch_xla
    import torch_xla.core.xla_model as xm

    params = list(model.parameters())
    width = 1 + 2 * len(task.specs)

    def average_grads_on_cpu():  # gloo-cpu: the gradients leave the device every step (recorded in host_syncs)
        flat = torch.cat([p.grad.flatten() for p in params]).cpu()
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        for p, chunk in zip(params, flat.split([p.numel() for p in params])):
            p.grad.copy_(chunk.view_as(p).to(p.device))

    def step(total):
        xb, yb = batches.next()
        optimizer.zero_grad(set_to_none=True)
        with context.forward():
            pred = model(xb)
            per_example = task.per_example_loss(yb, pred)
        loss = per_example.mean()
        loss.backward()
        total = total + task.step_stats(loss, yb, pred)
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
        torch_xla.sync()  # one step, one graph; the running sums stay on the device
        compiles.after_step()
        return total

    def train(k: int):
        total = torch.zeros(width, device=device)  # the same graph for every step of every window
        for _ in range(k):
            total = step(total)
        return total

    return train


def device_reads(met) -> int:
    """Device-to-host transfers so far in this process, as torch_xla counts them."""
    data = met.metric_data("TransferFromDeviceTime")
    return int(data[0]) if data else 0


def compile_snapshot(met) -> tuple[int, float]:
    """(number of XLA compilations, seconds spent compiling) so far in this process."""
    data = met.metric_data("CompileTime")
    return (0, 0.0) if not data else (int(data[0]), data[1] / 1e9)


def reset() -> None:
    """Never called: torch_xla cannot clear its compiled-graph cache, so every xla trial has processes of its own
    (its kinds' Strategy.cold)."""
    raise RuntimeError("an xla trial never runs in a warm worker group")


def device_name(pjrt: str) -> dict:
    """{"device_name": a Cloud TPU VM's accelerator type (TPU_ACCELERATOR_TYPE, "v5litepod-8")} for the vendors'
    peaks (raylab/record/vendor.py); {} elsewhere (torch_xla runs no CUDA here: raylab/frameworks/xla/kinds.py)."""
    import os

    name = os.environ.get("TPU_ACCELERATOR_TYPE") if pjrt == "TPU" else None
    return {"device_name": name} if name else {}
