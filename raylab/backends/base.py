"""The one small interface every trial strategy implements."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Callable


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
    model_family: str | None = None  # which recipe builder it uses, if not its framework's (xla -> torch)
    # Extra Ray resources each worker reserves (e.g. {"TPU": 4}), from the run config and cluster resources.
    resources: Callable[[object, dict], dict] | None = None
    replicas_found: bool = False  # replicas are the devices the worker finds (TPU cores), logged after it starts
    # Parameter-server roles beside the training workers: "chief" (tf:ps: a chief + ps + workers),
    # "hosts" (torch:ps-*: ps hosts + workers), None (no parameter servers).
    ps_roles: str | None = None

    @property
    def framework(self) -> str:
        return self.kind.split(":")[0]

    @property
    def models(self) -> str:
        return self.model_family or self.framework

    @property
    def name(self) -> str:
        return self.kind.split(":")[1]

    def layout(self, workers: int, threads: int, ps: int = 0) -> Layout:
        if self.in_one_process:
            return Layout(1, threads * workers, workers)
        if self.ps_roles == "chief":
            return Layout(1 + ps + workers, threads, workers)
        if self.ps_roles == "hosts":
            return Layout(workers + ps, threads, workers)
        return Layout(workers, threads, workers)


def new_group() -> str:
    """An id for one worker group (a restart makes a new group, with a new id)."""
    return uuid.uuid4().hex[:12]


def set_group(group: str) -> None:
    """On a worker, before the loop starts: RAYLAB_GROUP, its worker group's id. A parameter-server trial's
    processes find each other, and wait on each other, by it, never on the processes of a group that died.
    (A function, not os.environ.__setitem__: that pickles a copy of environ.)"""
    os.environ["RAYLAB_GROUP"] = group
