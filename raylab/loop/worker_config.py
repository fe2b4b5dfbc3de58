"""What every worker receives and knows about its host, whatever the framework.

The loop a worker runs is raylab/loop/ (windows, checkpoints, reporting); this module holds the small
picklable config the driver sends every worker, and the host facts every trial records.
"""

from __future__ import annotations

import os
import platform
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from raylab.task import Task


@dataclass
class WorkerConfig:
    """The small picklable config each worker receives (never driver objects)."""

    trial: str  # e.g. "tf:mwms x2"
    short: str  # the strategy's short name, e.g. "mwms"
    task: Task  # the recipe's task as declared: models, loss, optimizer, schedule, metrics, preprocessing
    shared: Any  # object refs of x_train, y_train, x_test, y_test; a raylab.data.stream.StreamInfo when streamed
    replicas: int  # replicas in sync across the whole trial
    batch_per_replica: int
    epochs: int
    threads: int  # intra-op threads per replica
    seed: int
    warmup_steps: int
    trial_start: float  # driver wall clock at trial start
    sink: Any  # TrialSink actor handle
    device: str = "cpu"
    precision: str = "fp32"  # asked for; backends record what they applied
    tpu_fallback: str = "error"  # tf:tpu with no TPU found: "error" or "mirrored" (recorded)
    ps: int = 0  # parameter servers (tf:ps, torch:ps-*)
    steps_per_epoch: int | None = None  # None: one pass over the shard; else the data repeats as needed
    seconds: float | None = None  # --seconds: end at the window whose steady steps reach it (None: every epoch)
    window: int = 32  # training steps between host reads (TF runs them as one tf.function call)
    checkpoint: bool = False  # checkpoint at epoch ends (and every checkpoint_every_s) for restarts
    checkpoint_every_s: float = 600.0  # also checkpoint inside an epoch this often (0: at epoch ends only)
    probe: bool = False  # a --batch max probe (raylab/probes/batchsize.py): its evaluation is one batch, unreported
    profile: bool = False  # rank 0 profiles its first steady window (raylab/loop/profile.py)
    memory_cap_mb: int | None = None  # the worker process's RLIMIT_DATA while it trains (None: none)
    # How its steps execute (`execution`: "eager", "inductor", "tf.function", "xla", "jit", ...: Strategy.executions)
    execution: str = "eager"
    compile_cache: str | None = None  # the directory its compiled code is cached in (None: the framework's default)
    run_id: str = ""  # its MLflow run: the trial its checkpoints belong to (a warm group runs several)
    # Whether ray.train.get_checkpoint() may be its own: only the first trial a warm group's (re)started processes
    # run; that checkpoint is from the processes' start, and a later trial's would be gone (raylab/loop/group_worker.py)
    restorable: bool = True
    storage: str | None = None  # --storage (None: ~/ray_results): where its checkpoints go, checked for room

    @property
    def framework(self) -> str:
        """Its framework's name, the kind's first half ("tf" in "tf:mwms x2")."""
        return self.trial.split(":")[0]

    @property
    def global_batch(self) -> int:
        return self.batch_per_replica * self.replicas

    def steps(self, one_pass: int) -> int:
        """Steps per epoch: the recipe's fixed number, else one pass over the shard."""
        return self.steps_per_epoch or one_pass


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_facts() -> dict:
    # Ray starts workers at nice 15 unless told otherwise; a benchmark must say at what priority it ran.
    return {"host": socket.gethostname(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "niceness": os.nice(0)}


def new_group() -> str:
    """An id for one worker group (a restart makes a new group, with a new id)."""
    return uuid.uuid4().hex[:12]


def set_group(group: str) -> None:
    """On a worker, before the loop starts: RAYLAB_GROUP, its worker group's id. A parameter-server trial's
    processes find each other, and wait on each other, by it, never on the processes of a group that died.
    (A function, not os.environ.__setitem__: that pickles a copy of environ.)"""
    os.environ["RAYLAB_GROUP"] = group
