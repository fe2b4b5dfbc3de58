"""torch.compile in the torch trials (--compile on): what a careful user compiles, where its code is cached, and its
compilations counted.

Compiled: the model (`torch.compile(module)`, an OptimizedModule around the same parameters: the module's own
state dict is what checkpoints hold, so they load either way) and the loss, each `fullgraph=True` (a graph break
is an error that names its cause, never a silent fall back to eager) and `dynamic=False` (training batches are
whole, so their shapes never change; evaluation's last, shorter batch and its inference mode compile once more,
counted as evaluation's). `backward()` runs the compiled graphs' backward. The optimizer stays eager, fused on the
CPU (one kernel per parameter group; its state exists only after the first step, and an optimizer step compiled
with it recompiles once then). DDP wraps the compiled model: dynamo cannot trace DDP's own forward with
fullgraph=True (its Logger call), so DDP's hooks all-reduce the gradients the compiled backward produced.

A mode ("inductor:max-autotune") is torch.compile's `mode`; reduce-overhead (CUDA graphs) runs on a GPU only
(raylab/frameworks/torch/kinds.py refuses it elsewhere before Ray starts).
"""

from __future__ import annotations

import os
import threading
import time


def set_cache(directory: str | None) -> None:
    """Inductor's on-disk cache (FX graphs, AOTAutograd, kernels) in `directory`, shared by this node's workers.
    Inductor reads the variable when it first needs the directory, so setting it before compiling is enough."""
    if directory:
        os.makedirs(directory, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(directory, "inductor")


def compiling(execution: str) -> bool:
    """Whether `execution` is torch.compile's ("inductor", "inductor:MODE"), not eager (nor torch_xla's "xla")."""
    return execution.startswith("inductor")


def mode_of(execution: str) -> str | None:
    """torch.compile's mode for an execution label ("inductor" -> None, its default; "inductor:MODE" -> MODE)."""
    return execution.partition(":")[2] or None


def compile_model(module, execution: str, threads: int = 1):
    """The module compiled as `execution` says, or the module itself for eager. Inductor compiles with the trial's
    `threads`: by default it starts a pool of compile processes, one per core, beside a worker that reserved
    `threads` CPUs (and each of them a Python process the worker's memory and start-up figures would not show)."""
    import torch

    from raylab.frameworks.prewarm import settled

    if not compiling(execution):
        return module
    settled()  # the process's start-up imports of torch._dynamo done before torch.compile imports Inductor
    import torch._inductor.config

    torch._inductor.config.compile_threads = threads  # 1: in this process, no pool
    return torch.compile(module, fullgraph=True, dynamic=False, mode=mode_of(execution))


def compile_loss(loss, execution: str):
    """loss(y, pred) -> the mean loss, compiled as `execution` says (eager: as it is)."""
    import torch

    if not compiling(execution):
        return loss
    return torch.compile(loss, fullgraph=True, dynamic=False, mode=mode_of(execution))


class Compilations:
    """snapshot() -> (compilations, seconds spent compiling) since it was made, from torch.compile's own
    callbacks: each graph dynamo captures and each backward compiled when it first runs is one compilation, its
    time from start to end (tracing, AOTAutograd, Inductor's code generation and the C++ compiler)."""

    def __init__(self):
        from torch._dynamo.callback import on_compile_end, on_compile_start

        self.count, self.seconds, self._start, self._lock = 0, 0.0, None, threading.Lock()
        on_compile_start(self._started)
        on_compile_end(self._ended)

    def _started(self, *_, **__) -> None:
        self._start = time.perf_counter()

    def _ended(self, *_, **__) -> None:
        with self._lock:
            if self._start is not None:
                self.count, self.seconds = self.count + 1, self.seconds + time.perf_counter() - self._start
            self._start = None

    def snapshot(self) -> tuple[int, float]:
        with self._lock:
            return self.count, self.seconds


def graph_breaks() -> int:
    """Graph breaks dynamo has counted in this process (fullgraph=True raises on one instead: 0 in a trial that ran)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def watch(warmup_steps: int, execution: str):
    """A CompileWatch (raylab/loop/compiles.py) over this process's torch.compile compilations; None for eager."""
    from raylab.loop.compiles import CompileWatch

    return CompileWatch(Compilations().snapshot, warmup_steps) if compiling(execution) else None
