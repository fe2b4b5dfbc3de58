"""The one small interface every trial strategy implements."""

from __future__ import annotations

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

    @property
    def framework(self) -> str:
        return self.kind.split(":")[0]

    @property
    def models(self) -> str:
        return self.model_family or self.framework

    @property
    def name(self) -> str:
        return self.kind.split(":")[1]

    def layout(self, workers: int, threads: int) -> Layout:
        if self.in_one_process:
            return Layout(1, threads * workers, workers)
        return Layout(workers, threads, workers)
