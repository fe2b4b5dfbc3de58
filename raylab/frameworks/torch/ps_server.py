"""A torch parameter-server trial's servers (raylab/frameworks/torch/ps.py): each a Ray actor holding one shard of the
parameters and its optimizer state, started by its host rank beside itself (`host_server`), from the last checkpoint
after a restart."""

from __future__ import annotations

import asyncio
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

PS_FILE = "parameter_servers.pt"  # a ps trial's checkpoint: every server's shard and the worker RNG
WAIT_S = 600.0  # the longest a server host waits for its servers' handles or its workers


@ray.remote(num_cpus=0)
class ParameterServer:
    """One shard of the parameters and its optimizer state. An asyncio actor: sync pushes wait for each other."""

    def __init__(
        self, shard: list, task, total_updates: int, workers: int, sync: bool, threads: int, state: dict | None = None
    ):
        import torch

        from raylab.frameworks.torch.task import TorchTask

        torch.set_num_threads(threads)
        shard = state["params"] if state else shard  # a restart: the shard as the last checkpoint holds it
        self.params = [torch.nn.Parameter(torch.from_numpy(a.copy())) for a in shard]
        # The recipe's optimizer and schedule, built here: the server applies the updates.
        self.optimizer, self.scheduler = TorchTask(task, total_updates).build_optimizer(self.params)
        self.workers, self.sync = workers, sync
        self.version, self.pending, self.applied = 0, [], asyncio.Event()
        self.staleness: list[int] = []
        self.apply_s = 0.0
        if state:
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scheduler is not None:
                self.scheduler.load_state_dict(state["scheduler"])
            self.version = state["version"]

    def state(self) -> dict:
        """This shard for a checkpoint: weights, optimizer and schedule state, version."""
        return {
            "params": [p.detach().numpy().copy() for p in self.params],
            "version": self.version,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
        }

    def _apply(self, grads: list) -> None:
        import torch

        t0 = time.perf_counter()
        for p, g in zip(self.params, grads):
            p.grad = torch.from_numpy(g)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.version += 1
        self.apply_s += time.perf_counter() - t0

    def weights(self) -> tuple[int, list]:
        return self.version, [p.detach().numpy().copy() for p in self.params]

    async def push(self, version: int, grads: list) -> tuple[int, list]:
        """A worker's gradient, computed on weights of `version`; returns the weights to compute on next."""
        if not self.sync:
            self.staleness.append(self.version - version)
            self._apply(grads)
            return self.weights()
        self.pending.append(grads)
        applied = self.applied
        if len(self.pending) == self.workers:
            # DDP divides each gradient by the world size, then sums: the same (exact for powers of two).
            mean = [sum(g / self.workers for g in same) for same in zip(*self.pending)]
            self.pending, self.applied = [], asyncio.Event()
            self._apply(mean)
            applied.set()
        else:
            await applied.wait()
        return self.weights()

    def built(self) -> tuple:
        """(optimizer, scheduler) as built here, for the worker's report of what ran."""
        return self.optimizer, self.scheduler

    def stats(self) -> dict:
        s = self.staleness
        return {
            "updates": self.version,
            "apply_s": self.apply_s,
            "staleness_mean": sum(s) / len(s) if s else 0.0,
            "staleness_max": max(s, default=0),
        }


def shard_parameters(sizes: list[int], servers: int) -> list[list[int]]:
    """Parameter indices per server, largest first onto the least-loaded server (stable, deterministic)."""
    load, shards = [0] * servers, [[] for _ in range(servers)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        s = min(range(servers), key=lambda k: (load[k], k))
        shards[s].append(i)
        load[s] += sizes[i]
    return [sorted(s) for s in shards]


def host_server(cfg, index: int, workers: int, total_updates: int, group: str) -> None:
    """A server host rank: start this shard's server beside itself (from the last checkpoint after a restart),
    publish it, take part in the workers' checkpoint reports, wait for the workers."""
    import ray.train
    import torch

    torch.manual_seed(cfg.seed)  # the same initial weights every worker (and DDP) starts from
    params = [p.detach().numpy() for p in cfg.task.models["torch"]().parameters()]
    mine = shard_parameters([p.size for p in params], cfg.ps)[index]
    state = None
    restored = ray.train.get_checkpoint() if cfg.checkpoint else None
    if restored is not None:
        with restored.as_directory() as d:
            state = torch.load(f"{d}/{PS_FILE}", weights_only=False)["servers"][index]
    node = ray.get_runtime_context().get_node_id()
    server = ParameterServer.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        max_concurrency=max(2 * workers, 4),
    ).remote([params[i] for i in mine], cfg.task, total_updates, workers, cfg.short == "ps-sync", cfg.threads, state)
    ray.get(server.weights.remote(), timeout=WAIT_S)  # up before anyone is told about it
    ray.get(cfg.sink.register.remote(f"{group}/ps{index}", server, mine), timeout=60)
    from raylab.loop import join_reports

    deadline, reports = time.monotonic() + cfg.epochs * WAIT_S, 0
    while ray.get(cfg.sink.finished.remote(group), timeout=60) < workers:
        reports = join_reports(cfg.sink, group, reports)  # the hosts report each time the workers do
        if time.monotonic() > deadline:
            raise TimeoutError(f"parameter server {index}: workers did not finish within {cfg.epochs * WAIT_S:.0f} s")
        time.sleep(0.05)
    ray.kill(server)
