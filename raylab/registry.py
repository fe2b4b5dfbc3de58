"""The registry: the frameworks raylab runs and their trial kinds, looked up by name and imported lazily, and what
each framework package provides (`Framework`, its parts) and what each of its trial kinds is (`Strategy`).

Each framework is a folder, `raylab/frameworks/<name>/`, with the same modules (PARTS): `__init__.py` holds its
`FRAMEWORK` (what raylab knows of it without importing it), `kinds.py` its trial kinds, then its task builder,
worker loop, profiler, memory reading, plain script and step-benchmark set-up. Adding a framework is adding a
folder with those parts and its name in NAMES below. The code outside the folders asks a `Framework` or a
`Strategy`, never a framework's name (tests/unit/test_frameworks.py), and imports the folders only through
this module, lazily: framework imports happen inside worker functions, so a TensorFlow trial never imports torch
and vice versa.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Callable

from raylab.errors import UserError


@dataclass(frozen=True)
class Layout:
    """How a trial's replicas map onto Ray workers."""

    ray_workers: int  # Ray Train workers (processes)
    cpus_per_worker: int  # Ray CPU resources each worker reserves
    replicas: int  # replicas in sync across the trial

    @property
    def cpus(self) -> int:
        return self.ray_workers * self.cpus_per_worker


@dataclass(frozen=True)
class Strategy:
    """A framework:strategy pair: how many replicas it can take and how its trainer is built.

    `worker_loop` is the function each Ray Train worker runs; `backend_config` returns the
    Ray Train BackendConfig that wires the processes together (TF_CONFIG, process group).
    """

    kind: str  # "framework:strategy"
    worker_loop: Callable[[dict], None]
    backend_config: Callable[[str], object]  # device -> BackendConfig
    max_workers: int | None = None  # None: any number of Ray workers
    in_one_process: bool = False  # replicas share one Ray worker (MirroredStrategy)
    # Driver-side checks before any worker starts (run config, cluster resources) -> UserError.
    preflight: Callable[[object, dict], None] | None = None
    # Extra Ray resources each worker reserves (e.g. {"TPU": 4}), from the run config and cluster resources.
    resources: Callable[[object, dict], dict] | None = None
    replicas_found: bool = False  # replicas are the devices the worker finds (TPU cores), logged after it starts
    # Parameter-server roles beside the training workers: "chief" (tf:ps: a chief + ps + workers),
    # "hosts" (torch:ps-*: ps hosts + workers), None (no parameter servers).
    ps_roles: str | None = None
    # What --precision bf16 meets on this kind: None (applied), a reason it never applies, or a function of the
    # device it runs on giving the reason (or None) where it depends on the device.
    bf16: str | Callable[[str], str | None] | None = None
    # What --precision fp16 meets (as bf16): fp16 needs loss scaling, which only some kinds' steps apply.
    fp16: str | Callable[[str], str | None] | None = "its step applies no loss scaling"
    # The device it runs on ("cpu", "gpu", "tpu") from the run config, where that is not --device (TPU kinds).
    device_of: Callable[[object], str] | None = None
    # Whether --batch max can search its largest batch (probes in one process on the host's or CUDA's allocator:
    # not XLA, which compiles per shape on its own allocator, nor the parameter servers).
    batch_search: bool = False
    # What its worker processes get in their environment from their start (what the framework reads at import,
    # raylab/frameworks/prewarm.py), from (its backend config, the run config).
    worker_env: Callable[[object, object], dict] | None = None
    # How its steps execute for each --compile value ("off", "on", "on:<mode>"): the label it runs and records as
    # `execution` ("eager", "tf.function", "inductor", "xla", "jit", ...). A value it has no key for, it cannot run;
    # a kind that always compiles (jax, torch_xla) maps every value to the same label. The label "xla" is the XLA
    # compiler (TF's jit_compile, TF on TPUs, torch_xla), never the framework of that name (NAMES: torch_xla).
    executions: dict = field(default_factory=lambda: {"off": "eager"})
    # Why an execution label cannot run on a device ("cpu", "gpu", "tpu"), or None: execution_check(label, device).
    execution_check: Callable[[str, str], str | None] | None = None
    # Why each of its trials needs worker processes of its own (raylab/driver/groups.py), or None: its trials can run
    # one after another in a warm worker group, resetting what a trial must not inherit between them.
    cold: str | None = None
    # The kind whose warm group its 1-worker trials may join where the invocation has a 1-worker trial of that kind
    # (raylab/driver/groups.py setup_of): its steps run the same in processes set up as that kind's (a process group
    # or a distributed world of one process, which they do not use), so the two kinds' trials share processes.
    warm_with: str | None = None

    @property
    def framework(self) -> str:
        return self.kind.split(":")[0]

    @property
    def models(self) -> str:
        """Whose model builder of a recipe it runs (its framework's `models`: xla runs torch's)."""
        return framework(self.framework).models

    @property
    def short(self) -> str:
        return self.kind.split(":")[1]

    def device(self, cfg) -> str:
        return self.device_of(cfg) if self.device_of else cfg.device

    def why_not(self, precision: str, device: str) -> str | None:
        """Why --precision `precision` ("bf16" or "fp16") cannot be applied on `device`, or None."""
        answer = self.bf16 if precision == "bf16" else self.fp16
        if callable(answer):
            return answer(device)
        return None if answer is None else f"{self.kind} has no {precision} step in raylab: {answer}"

    def execution(self, asked: str, device: str) -> tuple[str | None, str | None]:
        """(the execution label --compile `asked` runs, or None; why not, where it cannot run)."""
        label = self.executions.get(asked)
        if label is None:
            runs = ", ".join(sorted(set(self.executions.values())))
            return None, f"{self.kind} has no '{asked}' execution in raylab (it runs {runs})"
        reason = self.execution_check(label, device) if self.execution_check else None
        return (None, reason) if reason else (label, None)

    def candidates(self, device: str) -> list[str]:
        """What --compile best measures for it on `device`: its usual execution, then each compiled one it can run
        there (torch's default mode, and CUDA graphs on a GPU), distinct labels in that order."""
        asked = ("off", "on", "on:reduce-overhead") if device == "gpu" else ("off", "on")
        labels = [self.execution(a, device)[0] for a in asked if a in self.executions]
        return list(dict.fromkeys(label for label in labels if label is not None))

    def layout(self, workers: int, threads: int, ps: int = 0) -> Layout:
        if self.in_one_process:
            return Layout(1, threads * workers, workers)
        if self.ps_roles == "chief":
            return Layout(1 + ps + workers, threads, workers)
        if self.ps_roles == "hosts":
            return Layout(workers + ps, threads, workers)
        return Layout(workers, threads, workers)


# --compile's values: off, or on in one of torch.compile's modes ("on" is its default mode). A framework without
# modes maps each "on" value to its one compiled execution.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
COMPILED = tuple("on" if mode == "default" else f"on:{mode}" for mode in COMPILE_MODES)


def always(label: str) -> dict:
    """The executions of a kind that runs `label` whatever --compile says (jax's jit, torch_xla's graphs)."""
    return {value: label for value in ("off", *COMPILED)}


PS_NO_BF16 = "its parameter servers hold float32 weights and apply the updates"  # the ps kinds' bf16 and fp16 answer


# The modules every framework package has, and what each must define (tests/unit/test_frameworks.py checks).
PARTS = {
    "kinds": ("KINDS",),  # its trial kinds: short name -> Strategy (driver side: no framework import at the top)
    "task": ("BUILDER",),  # the task builder: the recipe's portable names -> the framework's objects
    # What its Ray Train workers run (the loops the kinds name), and reset(): between two trials of a warm worker
    # group, what a trial must not inherit from the one before (raylab/loop/group_worker.py)
    "worker": ("reset",),
    "profile": ("capture",),  # capture(cuda) -> a context around one window writing the framework's trace
    "memory": ("device_peak_mb",),  # the process's peak accelerator memory, MB, or None
    # count(task, model, x, y): FLOPs of one training step's forward pass and gradients on that batch, by the
    # framework's own counter, traced, not run (docs/comparing.md, work per sample); matmul(n, dtype, device,
    # threads) -> run(k): k n x n products, waited for (`raylab peak`: raylab/probes/peak.py)
    "flops": ("count", "matmul"),
    "plain": ("run", "env"),  # the plain script (raylab/frameworks/plain.py) and its subprocess environment
    # A step benchmark's (raylab/driver/stepbench.py) worker environment from the run config, and its threads, seed and
    # device set on the worker (set_up returns compiled() -> (compilations, seconds) so far, or None).
    "stepbench": ("env", "set_up"),
}
# The part a framework has where one of its kinds runs two executions or more on some device (--compile best races
# them): ready(task, x, y, batch, label, precision, device, threads, seed, cache_dir) -> the candidate built and its
# first step run, ready to be timed (raylab/probes/race.py Racer). A framework of one execution a kind has none.
RACE_PART = {"race": ("ready",)}
# The CUDA libraries a framework's GPU steps run on (pip's wheels): in every GPU framework's runtimes.
CUDA_RUNTIMES = ("nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cublas-cu12", "nvidia-cuda-nvrtc-cu12")
DEVICES = ("cpu", "gpu")  # the devices a kind's executions are asked on (Strategy.candidates)


@dataclass(frozen=True)
class Framework:
    """What raylab knows of a framework without importing it: its package's FRAMEWORK."""

    name: str  # the prefix of its trial kinds ("tf" in "tf:mwms")
    title: str  # how people name it ("TensorFlow")
    package: str  # the module it imports ("tensorflow")
    extra: str  # raylab's pip extra that installs it (raylab[tf])
    kinds: tuple[str, ...]  # its trial kinds' short names, the keys of its kinds.KINDS
    single: str  # its one-process kind: the trial a plain script and a step benchmark mirror
    models: str  # whose model builder a recipe gives it: its own name, or another's (xla runs torch's)
    imports: tuple[str, ...]  # what its worker loop imports first (raylab/frameworks/prewarm.py starts them early)
    color: str  # its colour in charts
    import_env: dict = field(default_factory=dict)  # environment read at import, set from a worker's start
    collective_paths: tuple[str, ...] = ()  # source paths of its collective ops (an error there: a lost peer?)
    device_errors: tuple[str, ...] = ()  # modules whose OutOfMemoryError is the accelerator's, not the host's
    # distributions besides `package` whose versions change what its steps compile to and run (kept answers are
    # keyed on them: raylab/probes/host.py); those not installed count as absent
    runtimes: tuple[str, ...] = ()
    # CPUs a training process keeps busy beside its intra-op threads (a thread that dispatches while another runs
    # the step): --pin-cpus gives each process these too (raylab/settings/pinning.py), or leaves it unpinned
    side_cpus: int = 0

    def races(self) -> bool:
        """Whether one of its kinds has two executions or more to race on some device (then RACE_PART is its part)."""
        return any(
            len(get_strategy(f"{self.name}:{kind}").candidates(device)) > 1 for kind in self.kinds for device in DEVICES
        )

    def parts(self) -> dict:
        """Every part its folder must have, and what each defines: PARTS, and RACE_PART where it races."""
        return {**PARTS, **(RACE_PART if self.races() else {})}

    def part(self, module: str):
        import importlib

        return importlib.import_module(f"raylab.frameworks.{self.name}.{module}")

    def plain_env(self, threads: int) -> dict:
        """The environment its plain script runs in (raylab/frameworks/plain.py, a subprocess): the trial's threads,
        the driver's import path, what the framework reads at import (its plain part's env: XLA's PJRT device and
        flags)."""
        import os
        import sys

        return {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            **self.import_env,
            **self.part("plain").env(threads),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }


# The registry: one line per framework, its package raylab.frameworks.<name>.
NAMES = ("tf", "torch", "xla", "jax")


@functools.cache
def framework(name: str) -> Framework:
    """The FRAMEWORK of raylab.frameworks.<name>."""
    if name not in NAMES:
        raise UserError(f"unknown framework '{name}'; choose from {', '.join(NAMES)}.")
    return importlib.import_module(f"raylab.frameworks.{name}").FRAMEWORK


def frameworks() -> list[Framework]:
    return [framework(name) for name in NAMES]


def kinds() -> list[str]:
    """Every trial kind, "framework:strategy"."""
    return [f"{fw.name}:{short}" for fw in frameworks() for short in fw.kinds]


def framework_of(kind: str) -> Framework:
    return framework(kind.split(":")[0])


def get_strategy(kind: str) -> Strategy:
    """The strategy object for 'framework:strategy'."""
    name, _, short = kind.partition(":")
    if name not in NAMES or short not in framework(name).kinds:
        raise UserError(f"unknown trial '{kind}'; choose from {', '.join(sorted(kinds()))}.")
    return framework(name).part("kinds").KINDS[short]
