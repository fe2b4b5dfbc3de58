"""The PyTorch worker loop of torch:none and torch:ddp (raylab/frameworks/torch/kinds.py), and the pieces the
xla loop shares with it (the shard, the step; the saver and the checksum: state.py)."""

from __future__ import annotations

import sys

from raylab.frameworks.torch.state import param_checksum, torch_saver


def shuffled_batches(n: int, batch: int, generator, device=None, start: int = 0):
    """Index batches over a shard of n samples, endlessly: each pass a new permutation cut into n // batch
    whole batches (the rest of the pass left out, so shapes never change). torch:none, torch:ddp and the
    torch:ps-* workers all draw from here, so they see the same order. `start` skips that many batches
    (a restart from a checkpoint): the generator draws the skipped passes' permutations as it would have."""
    import torch

    per_pass = n // batch
    skip_passes, skip = divmod(start, per_pass)
    for _ in range(skip_passes):
        torch.randperm(n, generator=generator)
    while True:
        order = torch.randperm(n, generator=generator)
        if device is not None:
            order = order.to(device)
        yield from order[: per_pass * batch].split(batch)[skip:]
        skip = 0


def shard_batches(x, y, batch: int, seed: int, device=None):
    """The worker's in-memory shard as a batch source: shuffled index batches (seeded per rank) gathered from
    the shard's tensors, where they are (on the device for torch:none and torch:ddp)."""
    import torch

    from raylab.data import num_items
    from raylab.loop import Batches

    def start(done: int):
        order = shuffled_batches(num_items(x), batch, torch.Generator().manual_seed(seed), device, start=done)
        return (take_batch(x, y, idx) for idx in order)

    return Batches(start)


def batch_source(data, batch: int, seed: int, steps_per_epoch: int, device=None):
    """The worker's batches: its in-memory shard's tensors (moved to the device once), or its streamed split
    cut from Ray Data's chunks (prepared and made tensors on the delivery's cutter thread, then moved)."""
    from raylab.frameworks.torch.task import to_tensors
    from raylab.loop import StreamBatches

    if not data.streamed:
        return shard_batches(to_tensors(data.x, device), to_tensors(data.y, device), batch, seed, device)
    epoch = data.batches(batch, seed, convert=lambda xy: (to_tensors(xy[0]), to_tensors(xy[1])))
    move = (
        (lambda xy: (to_tensors(xy[0], device), to_tensors(xy[1], device))) if device is not None else (lambda xy: xy)
    )
    return StreamBatches(epoch, steps_per_epoch, move)


def torch_worker_loop(config: dict) -> None:
    """A torch trial's worker (torch:none, torch:ddp): the loop's start with torch's imports, the device, the data, the
    model (DDP around it for torch:ddp; torch.compile under --compile on), then the shared loop
    (raylab/loop/epochs.py run_epochs)."""
    from raylab.loop.start import start

    cfg, phases, ctx, _ = start(config, torch_imports)
    import torch

    from raylab.frameworks.torch import flops
    from raylab.loop import Training, combined, run_epochs

    rank = ctx.get_world_rank()
    device = torch.device(f"cuda:{ctx.get_local_rank()}" if cfg.device == "gpu" else "cpu")
    if cfg.device == "gpu":
        torch.cuda.set_device(device)
    phases.mark("setup")  # threads, seed and float32 arithmetic: setup(), at the loop's start
    task, steps_per_epoch, data = shard_and_task(cfg, ctx)
    batches = batch_source(
        data, cfg.batch_per_replica, cfg.seed + rank, steps_per_epoch, device if device.type != "cpu" else None
    )
    phases.mark("data")

    module, compiled, model, optimizer, scheduler, compiles = build_model(task, cfg, device)
    phases.mark("model")
    from raylab.frameworks.torch.profile import capture

    step, scale = step_context(
        cfg.precision, device, optimizer, capture(device.type == "cuda") if cfg.profile else None
    )
    actual = _actual(cfg, ctx, device, model, module, step, task, optimizer, scheduler, data, compiles)
    read = CountedReads()  # counted where GradScaler reads too (a recipe's optimizer under fp16)

    training = Training(
        steps_per_epoch,
        train_fn(task, model, optimizer, scheduler, batches, step, scale, mean_loss(task, cfg.execution), compiles),
        counted(compiles, task.evaluator(compiled, device)),
        task.results,
        actual,
        lambda: param_checksum(module),
        read=read,
        batches=batches,
        step=step,
        data=data,
        flops=flops.of(task, module),
        activations=flops.activations_of(module),
        saver=torch_saver(module, optimizer, scheduler, device, scale),
        phases=phases,
        syncs=(lambda: read.count + scale.reads) if scale is not None and not scale.on_device else None,
        extra=combined(scale.figures if scale is not None else None, compile_figures(compiles)),
    )
    run_epochs(cfg, rank, training)


def _actual(cfg, ctx, device, model, module, step, task, optimizer, scheduler, data, compiles) -> dict:
    """What rank 0 says ran: the strategy, the device, the process group its steps use, the precision applied."""
    import torch
    import torch.distributed as dist

    return {
        "strategy_class": type(model).__name__ if cfg.short == "ddp" else "none",
        "device_kind": device.type,
        **({"device_name": torch.cuda.get_device_name(device)} if device.type == "cuda" else {}),
        # the process group its steps use (torch:none in a warm group beside torch:ddp x1 has one it never calls)
        "comm_backend": dist.get_backend() if cfg.short == "ddp" and dist.is_initialized() else "none",
        "replicas_in_sync": ctx.get_world_size(),
        **torch_facts(module),
        "precision_applied": step.precision,
        **task.built(optimizer, scheduler, data.sample()),
        "execution": cfg.execution,
        **({"recompile_steps": compiles.late_steps} if compiles else {}),  # filled in as training runs, as xla's
    }


def build_model(task, cfg, device):
    """(module, the model as compiled, as trained (DDP around it for torch:ddp), optimizer, scheduler, CompileWatch or
    None): under --compile on, torch.compile of the model (raylab/frameworks/torch/compiled.py)."""
    from torch.nn.parallel import DistributedDataParallel

    from raylab.frameworks.torch.compiled import compile_model, watch

    module = task.build_model().to(device)
    compiled = compile_model(module, cfg.execution, cfg.threads)
    model = DistributedDataParallel(compiled) if cfg.short == "ddp" else compiled
    model.train()
    optimizer, scheduler = task.build_optimizer(model.parameters())
    return module, compiled, model, optimizer, scheduler, watch(cfg.warmup_steps, cfg.execution)


def step_context(precision: str, device, optimizer, profile=None):
    """(StepContext, LossScale or None): bf16 and fp16 autocast around the forward pass (CPU and CUDA), the loss and
    metrics on float32 outputs; fp16 also scales the loss (raylab/frameworks/torch/loss_scale.py)."""
    import torch

    from raylab.frameworks.torch.loss_scale import LossScale
    from raylab.loop import StepContext

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    step = (
        StepContext(precision, autocast=lambda: torch.autocast(device.type, dtype=low), profile=profile)
        if low is not None
        else StepContext(profile=profile)
    )
    return step, LossScale(optimizer, device) if precision == "fp16" else None


def torch_imports(cfg) -> None:
    """A torch-family worker's imports at the loop's start (raylab/loop/start.py): torch, set up (setup())."""
    setup(cfg.threads, cfg.seed, cfg.compile_cache)


def setup(threads: int, seed: int, compile_cache: str | None) -> None:
    """What every torch process that steps a recipe's model sets before it builds one: a trial's worker and
    --compile best's racer (race.py) call this one function, so that what the race times is what the trial runs.
    Threads (Ray sets OMP_NUM_THREADS, but say it explicitly: 2 intra-op threads ran 14x slower than 1 at batch 32
    on a 2-core machine); the seed (same init on every rank; DDP also broadcasts rank 0's); Inductor's cache; and
    float32 in float32: TF32 off for matmuls and cuDNN's convolutions (cuDNN's is on by default, matmuls' off), as
    in TF, recorded as float32_matmul."""
    import torch

    from raylab.frameworks.torch.compiled import set_cache

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    set_cache(compile_cache)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def shard_and_task(cfg, ctx, xla: bool = False):
    """(TorchTask, steps per epoch, this worker's data: raylab/data/shard.py's MemoryShard or StreamShard)."""
    from raylab.data.shard import items_per_worker, worker_data
    from raylab.frameworks.torch.task import TorchTask

    world, rank = ctx.get_world_size(), ctx.get_world_rank()
    steps_per_epoch = cfg.steps(items_per_worker(cfg, world) // cfg.batch_per_replica)
    task = TorchTask(cfg.task, steps_per_epoch * cfg.epochs, xla=xla)
    task.eval_batch = cfg.batch_per_replica
    return task, steps_per_epoch, worker_data(cfg, world, rank, lambda x, y: (task.inputs(x), task.targets(y)))


def take_batch(x, y, idx):
    from raylab.frameworks.torch.task import take

    return take(x, idx), take(y, idx)


def train_fn(task, model, optimizer, scheduler, batches, context, scale=None, loss_of=None, compiles=None):
    """train(k) -> [loss, metric sums...] of k optimizer updates, summed on the device and not read:
    nothing in a step waits on the host (DDP averages gradients). Batches come from `batches` (a
    BatchSource); the forward pass runs in the StepContext's precision context, the loss (`loss_of(y, pred)`,
    mean_loss: compiled where the model is) on float32 outputs; with fp16's `scale` (a LossScale, outside any
    compiled code) the loss is scaled for backward() and the step skipped where the gradients are not finite.
    `compiles` (a CompileWatch) is told of each step. The sums are kept as a plain loop keeps its running loss and
    accuracy (TorchTask.step_sums)."""
    sums = task.step_sums()
    loss_of = loss_of or mean_loss(task, "eager")

    def step():
        xb, yb = batches.next()
        optimizer.zero_grad(set_to_none=True)
        with context.forward():
            pred = model(xb)
        if context.precision != "fp32":
            pred = as_float32(pred)
        loss = loss_of(yb, pred)  # over the replica's batch; DDP averages across ranks
        if scale is None:
            loss.backward()
            optimizer.step()
        else:
            scale.backward(loss)
            scale.step()
        if scheduler is not None:
            scheduler.step()
        sums.add(loss, yb, pred)
        if compiles is not None:
            compiles.after_step()

    def train(k: int):
        for _ in range(k):
            step()
        return sums.take()

    return train


def mean_loss(task, execution: str):
    """loss_of(y, pred) -> the batch's mean loss, compiled as `execution` says (raylab/frameworks/torch/compiled.py)."""
    from raylab.frameworks.torch.compiled import compile_loss

    return compile_loss(lambda y, pred: task.per_example_loss(y, pred).mean(), execution)


def counted(compiles, evaluate):
    """evaluate, its compilations counted apart where the trial compiles (a CompileWatch), else as it is."""
    return compiles.apart(evaluate) if compiles is not None else evaluate


def compile_figures(compiles):
    """Training.extra of a compiled trial: the compile_* figures and graph breaks (None for eager)."""
    if compiles is None:
        return None
    from raylab.frameworks.torch.compiled import graph_breaks

    return lambda: {**compiles.figures(), "graph_breaks": graph_breaks()}


def as_float32(pred):
    """A lower-precision forward pass's outputs (a tensor, or a dict or tuple of them) as float32."""
    from raylab.data import tree_map

    if isinstance(pred, (tuple, list)):
        return type(pred)(t.float() for t in pred)
    return tree_map(lambda t: t.float(), pred)


class CountedReads:
    """The loop's host reads of its window sums (`read=`), counted: torch's GradScaler and a ps worker's pushes read
    too, and the trial's `host_syncs` adds them up."""

    def __init__(self):
        self.count = 0

    def __call__(self, sums):
        self.count += 1
        return host_copy(sums)


def host_copy(sums):
    """The window's one device-to-host read."""
    return sums.double().cpu().numpy()


def torch_facts(module) -> dict:
    """What every torch and xla trial records about what ran: versions, parameters, the model's settings (read
    before its first step), threads."""
    import torch

    from raylab.frameworks.torch.layers import model_settings

    tf32 = torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32
    return {
        "framework_version": torch.__version__,
        "precision_applied": "fp32",
        "local_replicas": 1,
        "float32_matmul": "tf32" if tf32 and torch.cuda.is_available() else "ieee",
        "parameters": sum(p.numel() for p in module.parameters()),
        "model_settings": model_settings(module),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
    }


_DYNAMO_AT_RESET = [0]  # dynamo_activity() at the last reset


def dynamo_activity() -> int:
    """How much dynamo has done in this process (frames seen, graphs captured; its counters survive a reset), 0
    where it was never imported: an eager trial leaves it where it was."""
    if "torch._dynamo" not in sys.modules:
        return 0
    from torch._dynamo.utils import counters

    return sum(sum(counter.values()) for counter in counters.values())


def reset() -> None:
    """Between two trials of a warm worker group (raylab/loop/group_worker.py): torch's process-wide state as a new
    process has it. Dynamo's compiled code is keyed on the last trial's model objects (a new model would recompile
    as a guard failure, and count against its recompile limit); Inductor's cache on disk stays, so a repeat
    compiles from it. Only where dynamo ran since the last reset: its first reset imports what it clears (582
    modules, 4.2 s on torch 2.11, H200 host, 2026-11-27), which an eager trial never needed."""
    import torch

    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    if (ran := dynamo_activity()) != _DYNAMO_AT_RESET[0]:
        torch._dynamo.reset()
        _DYNAMO_AT_RESET[0] = ran
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
