"""Typed run configuration: what one invocation's command line settled (`Settings`) and each trial of its matrix
(`TrialSpec`, which resolves its kind's Strategy once). raylab/cli/ builds them at the door, each value checked
(raylab/cli/expand.py); what each trial runs with is resolved, and what cannot run refused, in
raylab/settings/resolve.py: every user mistake is a UserError before Ray starts or any worker runs.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from raylab.registry import Strategy, framework_of, get_strategy

# Training steps between host reads. bench/studies/step_loop.py measured it on this repository's 2-core
# machine (docs/results.md, "Steps per host read"): the MLP at batch 32 gains little past 32.
DEFAULT_WINDOW = 32

# What --precision and --set precision=... may ask for; each backend records what it applied.
PRECISIONS = ("fp32", "bf16", "fp16")  # what each trial kind applies: raylab/settings/precision.py


@dataclass(frozen=True)
class TrialSpec:
    """One way of running a recipe: framework:strategy on a number of replicas.

    Three names, one trial (say TensorFlow's MultiWorkerMirroredStrategy on two replicas):
      kind      "tf:mwms"     framework:strategy, one of raylab.registry.kinds() and what --trials lists
      short     "mwms"        the strategy's short name within its framework (recorded as requested_strategy)
      name      "tf:mwms x2"  the kind on its worker count (plus " bB" in a --batch sweep): the MLflow run name
    """

    framework: str  # a framework's name (raylab/registry.py NAMES)
    short: str  # the strategy's short name, e.g. "mwms", "ddp"
    workers: int  # data-parallel replicas asked for
    batch: int | None = (
        None  # a --batch sweep's size (per replica, or global where the recipe fixes it); None: the recipe's
    )
    # How its steps execute where --compile changed it from the kind's own ("inductor", "xla": Strategy.executions);
    # None: the kind's --compile off execution (eager torch, TF's tf.function, jax's jit)
    execution: str | None = None
    # --compile best: its execution was chosen by measuring its kind's candidates (raylab/probes/race.py); the name
    # leaves it out, so a trial keeps its name (and --resume its key) whichever candidate won
    best: bool = False
    # Where a --device sweep (or an accelerator type) places it: "gpu", "cpu:T4" (the CPUs of a node of that Ray
    # accelerator type), "gpu:H100"; None: the invocation's one --device, on any node. The name shows it.
    hardware: str | None = None

    @property
    def kind(self) -> str:
        """'tf:mwms': framework:strategy."""
        return f"{self.framework}:{self.short}"

    @property
    def name(self) -> str:
        """The MLflow run name, the same shape for every framework so the compare view lines up."""
        return (
            f"{self.kind} x{self.workers}"
            + (f" b{self.batch}" if self.batch else "")
            + (f" {self.execution}" if self.execution and not self.best else "")
            + (f" on {self.hardware}" if self.hardware else "")
        )

    def executes(self) -> str:
        """The execution label it runs and records (`execution`): its own, else its kind's --compile off one."""
        return self.execution or self.strategy.executions["off"]

    def compiled(self) -> bool:
        """Whether its steps run compiled: its execution is the one its kind runs under --compile on."""
        return self.executes() == self.strategy.executions.get("on")

    @property
    def strategy(self) -> Strategy:
        """Its kind's Strategy, resolved once (the driver, the trainer, the groups and the record all ask this); a
        plain script's ("torch:plain") is the one its framework's plain script mirrors. Not pickled: a process
        that receives the spec resolves its own."""
        found = self.__dict__.get("_resolved")
        if found is None:
            single = framework_of(self.kind).single if self.short == "plain" else self.short
            found = get_strategy(f"{self.framework}:{single}")
            object.__setattr__(self, "_resolved", found)
        return found

    def layout(self, cfg: "Settings"):
        """Its processes and replicas (a registry Layout) under the invocation's threads and parameter servers."""
        return self.strategy.layout(self.workers, cfg.threads, cfg.ps)

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_resolved"}


@dataclass
class Settings:
    """Everything one invocation of a recipe needs, as the command line settled it (not Ray Train's RunConfig)."""

    trials: list[TrialSpec]  # the trial matrix, in the order it runs (each repeated `repeats` times)
    epochs: int  # passes over each worker's shard
    threads: int  # intra-op threads per replica (decides results on small machines)
    seed: int  # model init, shuffling and sharding
    quick: bool  # a data subset and 1 epoch, for smoke runs
    tracking_uri: str  # MLflow tracking URI
    experiment: str  # MLflow experiment name
    json_path: Path | None = None  # machine-readable summary, if asked
    prices: dict | None = None  # node type -> USD an hour (--prices: raylab/record/prices.py)
    device: str = "cpu"  # "cpu" or "gpu": what each replica is asked to run on (a trial's own under a sweep: on())
    accelerator_type: str | None = None  # the Ray accelerator type its nodes must have (a trial's own: on())
    hardware: list[str] = field(default_factory=list)  # --device's items as asked ("cpu", "gpu:H100"), in order
    precision: str = "fp32"  # asked for; what a trial applies: raylab/settings/resolve.py trial()
    precision_fallback: str = "error"  # a trial that cannot apply --precision: "error" before Ray starts, or "fp32"
    notes: list[str] = field(default_factory=list)  # things the driver should tell the user
    tpu_fallback: str = "error"  # tf:tpu without a TPU: "error" before training, or run "mirrored" and record it
    tpu_type: str | None = None  # e.g. "v4-8": TPU trials ask Ray for that slice's head resource
    ps: int = 1  # parameter servers for tf:ps and torch:ps-* trials
    tpu_topology: str | None = None  # e.g. "2x2x1": with tpu_type, how Ray reserves a slice for several workers
    steps_per_epoch: int | None = None  # None: an epoch is one pass over each worker's shard
    # --seconds: a trial ends at the window its steady steps reach this many seconds (its epochs and steps the
    # most it runs); None: it runs them all
    seconds: float | None = None
    repeats: int = 1  # each trial runs this many times, interleaved, each its own child run
    plain: bool = False  # also run each framework's job as a plain script (no Ray, no raylab)
    window: int = DEFAULT_WINDOW  # training steps between host reads
    max_failures: int = 1  # worker-group restarts Ray Train may make per trial, from the last checkpoint
    checkpoint_every_min: float = 10.0  # checkpoints inside long epochs this often (0: at epoch ends only)
    storage: str | None = None  # Ray Train storage for checkpoints (None: Ray's default, ~/ray_results)
    # which checkpoints outlive their trial: "none" (a finished trial's go; an unfinished one's stay for --resume),
    # "last" (each trial's last), "all" (every one taken) (raylab/driver/retention.py)
    keep_checkpoints: str = "none"
    resume: str | None = None  # a parent run id whose unfinished trials this invocation runs
    streamed: bool = False  # the data streams through Ray Data (raylab/data/stream.py): it needs CPUs of its own
    probe: bool = False  # a --batch max probe: train, one evaluation batch (raylab/probes/batchsize.py)
    batch_max: bool = (
        False  # --batch max: each trial runs at the largest batch its probes fit (raylab/probes/batchsize.py)
    )
    profile: bool = False  # --profile: one steady window of rank 0 per trial, in the framework's profiler
    memory_cap_mb: int | None = None  # each training worker process's RLIMIT_DATA (None: no cap)
    concurrency: int | None = 1  # trials at once, each on whole nodes of its own (None: as many as nodes allow)
    # Compiled artefacts (Inductor's cache, jax's persistent cache): "warm", one directory per invocation shared by
    # the trials and workers of a node; "cold", a new empty one per trial
    compile_cache: str = "warm"
    # Every trial in worker processes of its own (--fresh-processes); else trials that can share processes run one
    # after another in a warm worker group (raylab/driver/groups.py)
    fresh_processes: bool = False
    pin_cpus: bool = False  # --pin-cpus: a trial's training processes on CPUs of their own (raylab/settings/pinning.py)
    share_nodes: bool = False  # --share-nodes: hold no node against other jobs (raylab/driver/hold.py)
    invocation_key: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # names its compile cache directory
    # --compile best: (framework, batch per replica, precision) -> its Choice, once raced (measured) or read from the
    # host's cache (raylab/probes/race.py); --race-again measures again instead of reading the cache
    best: dict = field(default_factory=dict)
    race_again: bool = False

    def length(self) -> str:
        """How long each trial trains, for people: "10 epoch(s)", or "until 5 s of steady steps (at most 10
        epoch(s))"."""
        epochs = f"{self.epochs} epoch(s)"
        return epochs if self.seconds is None else f"until {self.seconds:g} s of steady steps (at most {epochs})"

    def on(self, spec: TrialSpec) -> "Settings":
        """The settings a trial runs under: the invocation's, with its own device and accelerator type where
        --device sweeps hardware (TrialSpec.hardware); the same object where it does not."""
        return self if spec.hardware is None else self.at(spec.hardware)

    def at(self, hardware: str | None) -> "Settings":
        """These settings on one hardware item ("gpu", "cpu:T4"); unchanged for None."""
        import dataclasses

        if hardware is None:
            return self
        device, _, accelerator = hardware.partition(":")
        return dataclasses.replace(self, device=device, accelerator_type=accelerator or None)


def compile_cache_dir(cfg: Settings, run_id: str) -> str:
    """Where a trial's workers cache compiled code on their node: the invocation's directory (warm), or one of the
    trial's own (cold). The driver removes its own node's at the invocation's end (remove_compile_cache)."""
    root = _compile_root(cfg)
    return str(root if cfg.compile_cache == "warm" else root / run_id)


def remove_compile_cache(cfg: Settings) -> None:
    import shutil

    shutil.rmtree(_compile_root(cfg), ignore_errors=True)


def _compile_root(cfg: Settings) -> Path:
    """The invocation's compile cache directory on a node."""
    return Path(tempfile.gettempdir()) / "raylab-compile" / cfg.invocation_key


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else a sqlite store in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"
