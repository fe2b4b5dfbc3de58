"""PyTorch parameter servers on Ray actors: torch:ps-sync and torch:ps-async.

A trial is one Ray Train worker group (so one placement group: it gets every process or
waits): ranks 0..W-1 train, ranks W..W+P-1 each host one parameter-server actor on their
node and hold its CPU reservation. The parameters are sharded over the P servers (greedy by
size); each server holds its shard's weights and Adam state.

- sync: every worker pushes its gradient for version v; the server averages the W gradients,
  applies one Adam step and answers all W pushes with the new weights. Same update as DDP's
  all-reduce, so the same weights for the same seed and data order (a test checks).
- async: each push is applied when it arrives; its staleness is the number of updates the
  server applied since the pushing worker pulled the weights it computed on.

A server actor is owned by its host rank: if the host dies, Ray kills the actor; if a server
dies, its workers' next push raises and the trial fails. Either way Ray Train tears the group
down and nothing stays behind. The servers: raylab/frameworks/torch/ps_server.py.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import ray
from ray.train.backend import Backend, BackendConfig

from raylab.failure import LostProcessError
from raylab.frameworks.torch.ps_server import PS_FILE, WAIT_S, host_server
from raylab.loop.worker_config import new_group, set_group


def ps_saver(servers: list, group: str, sink):
    """Checkpoints of a ps trial, in torch's format: every server's shard (weights, optimizer, schedule, version)
    and the worker RNG, written by worker rank 0; a restarted group's hosts start their servers from it."""
    import torch

    from raylab.loop import Saver, announce_report

    def save(directory: str, rank: int) -> None:
        if rank == 0:
            states = ray.get([h.state.remote() for h, _ in servers], timeout=WAIT_S)
            torch.save({"servers": states, "rng": torch.get_rng_state()}, f"{directory}/{PS_FILE}")

    def load(directory: str) -> None:
        torch.set_rng_state(torch.load(f"{directory}/{PS_FILE}", weights_only=False)["rng"])

    return Saver(save, load, before_report=announce_report(sink, group))


def torch_ps_loop(config: dict) -> None:
    from raylab.loop.start import hello

    hello(config["cfg"].sink)
    import ray.train
    import torch

    from raylab.data import num_items

    cfg = config["cfg"]
    torch.set_num_threads(cfg.threads)
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    workers = world - cfg.ps
    sync = cfg.short == "ps-sync"
    n = num_items(ray.get(cfg.shared["y_train"])) // workers  # every worker's shard (shard_indices)
    steps_per_epoch = cfg.steps(n // cfg.batch_per_replica)
    total_updates = steps_per_epoch * cfg.epochs * (1 if sync else workers)
    group = os.environ.get("RAYLAB_GROUP", "")
    if rank >= workers:
        return host_server(cfg, rank - workers, workers, total_updates, group)
    try:
        _train(cfg, rank, workers, sync, steps_per_epoch, total_updates, group)
    finally:
        ray.get(cfg.sink.finish.remote(group), timeout=60)


def _train(cfg, rank: int, workers: int, sync: bool, steps_per_epoch: int, total_updates: int, group: str) -> None:
    """A ps worker: its shard, the model pulled from the servers, the shared loop."""
    import torch

    from raylab.frameworks.torch.compiled import compile_model, set_cache, watch
    from raylab.frameworks.torch.state import param_checksum
    from raylab.frameworks.torch.worker import CountedReads, compile_figures, counted, mean_loss, train_fn
    from raylab.loop import StepContext, Training, combined, run_epochs

    task, batches, test = _shard(cfg, rank, workers, total_updates)
    model = task.build_model().train()
    servers = _find_servers(cfg, group)
    remote = ServerOptimizer(servers, list(model.parameters()))  # starts from the servers' weights

    set_cache(cfg.compile_cache)
    compiled = compile_model(model, cfg.execution, cfg.threads)  # --compile on: the worker's forward pass and loss
    compiles = watch(cfg.warmup_steps, cfg.execution)
    step = StepContext()
    train = train_fn(
        task, compiled, remote, None, batches, step, loss_of=mean_loss(task, cfg.execution), compiles=compiles
    )
    evaluate = counted(compiles, task.evaluator(compiled, torch.device("cpu")))
    actual = _actual(cfg, task, model, servers, test, workers, sync)
    # Sync: the weights each worker holds after its last pull, as they are (they must agree). Async workers
    # pull at different versions by design: nothing to compare.
    checksum = (lambda: param_checksum(model)) if sync else (lambda: None)
    # Every step's gradients leave the worker for the servers: a host read per step besides the window's.
    read = CountedReads()

    training = Training(
        steps_per_epoch,
        train,
        lambda: evaluate(*test),
        task.results,
        actual,
        checksum,
        read=read,
        batches=batches,
        step=step,
        saver=ps_saver(servers, group, cfg.sink),
        syncs=lambda: read.count + remote.comm["steps"],
        extra=combined(
            lambda: ps_figures(servers, remote.comm, 2 * remote.param_bytes * workers, sync),
            compile_figures(compiles),
        ),
    )
    run_epochs(cfg, rank, training)


def _shard(cfg, rank: int, workers: int, total_updates: int):
    """(the task, this worker's batches, the test split as tensors): the same init and dropout stream as torch:ddp."""
    import torch

    from raylab.data.shard import MemoryShard
    from raylab.frameworks.torch.task import TorchTask, to_tensors
    from raylab.frameworks.torch.worker import shard_batches

    torch.manual_seed(cfg.seed)  # as torch:ddp: same init, and the same dropout stream per rank
    task = TorchTask(cfg.task, total_updates)
    task.eval_batch = cfg.batch_per_replica
    data = MemoryShard(cfg.shared, workers, rank, cfg.seed, lambda x, y: (task.inputs(x), task.targets(y)))
    batches = shard_batches(to_tensors(data.x), to_tensors(data.y), cfg.batch_per_replica, cfg.seed + rank)
    return task, batches, tuple(map(to_tensors, data.test()))


def _actual(cfg, task, model, servers, test, workers: int, sync: bool) -> dict:
    """What rank 0 says ran: parameter servers on Ray actors, what the servers' optimizer was built as."""
    from raylab.frameworks.torch.worker import torch_facts

    return {
        "strategy_class": f"ParameterServer({'sync' if sync else 'async'})",
        "replicas_in_sync": workers if sync else 1,
        "device_kind": "cpu",
        "comm_backend": "ray-actors",
        "parameter_servers": cfg.ps,
        **torch_facts(model),
        "execution": cfg.execution,
        **task.built(*ray.get(servers[0][0].built.remote(), timeout=60), test[0]),
    }


class ServerOptimizer:
    """What a ps worker's step calls its optimizer: step() pushes this worker's gradients to the servers
    and loads the weights they answer with (the pull); the servers' optimizers apply the updates."""

    def __init__(self, servers: list, params: list):
        self.servers, self.params = servers, params
        self.versions, self.comm = [0] * len(servers), {"s": 0.0, "steps": 0}
        self.param_bytes = sum(p.numel() * p.element_size() for p in params)
        for k, (handle, _) in enumerate(servers):
            self._load(k, *ray.get(handle.weights.remote(), timeout=WAIT_S))

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        t0 = time.perf_counter()
        for k, (version, arrays) in enumerate(_push(self.servers, self.versions, self.params)):
            self._load(k, version, arrays)
        self.comm["s"] += time.perf_counter() - t0
        self.comm["steps"] += 1

    def _load(self, index: int, version: int, arrays: list) -> None:
        import torch

        self.versions[index] = version
        with torch.no_grad():
            for i, a in zip(self.servers[index][1], arrays):
                self.params[i].copy_(torch.from_numpy(a.copy()))  # replies arrive as read-only arrays


def ps_figures(servers: list, comm: dict, bytes_per_step: int, sync: bool) -> dict:
    stats = ray.get([h.stats.remote() for h, _ in servers], timeout=60)
    return {
        "ps_push_pull_ms": 1000 * comm["s"] / max(comm["steps"], 1),  # one worker's round trip per step
        "ps_bytes_per_step": bytes_per_step,  # every worker pushes gradients and pulls weights
        "ps_updates": sum(s["updates"] for s in stats) / len(stats),
        "ps_apply_ms": 1000 * sum(s["apply_s"] for s in stats) / max(sum(s["updates"] for s in stats), 1),
        **(
            {
                "staleness_mean": sum(s["staleness_mean"] for s in stats) / len(stats),
                "staleness_max": max(s["staleness_max"] for s in stats),
            }
            if not sync
            else {}
        ),
    }


def _find_servers(cfg, group: str) -> list:
    """The servers' (handle, parameter indices), once their hosts (of this worker group) have started them."""
    deadline = time.monotonic() + WAIT_S
    while True:
        found = ray.get(cfg.sink.lookup.remote([f"{group}/ps{i}" for i in range(cfg.ps)]), timeout=60)
        if found is not None:
            return [(handle, shard) for handle, shard in found]
        if time.monotonic() > deadline:
            raise TimeoutError(f"parameter servers not up after {WAIT_S:.0f} s")
        time.sleep(0.2)


def _push(servers: list, versions: list, params: list) -> list:
    """Each server's shard of the gradients; each answers with its new (version, weights)."""
    try:
        return ray.get(
            [
                h.push.remote(versions[k], [params[i].grad.numpy() for i in shard])
                for k, (h, shard) in enumerate(servers)
            ],
            timeout=WAIT_S,
        )
    except ray.exceptions.RayActorError as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise LostProcessError(
            f"a parameter server died mid-trial ({first}); its shard of the weights is gone "
            "with it, so this worker group stops (a restart, where --max-failures allows one, starts "
            "from the last checkpoint)"
        ) from None


class _GroupBackend(Backend):
    def on_start(self, worker_group, backend_config):
        # Each worker group (a restart makes a new one) gets its own id: its hosts and workers find each other
        # by it, never the servers of a group that died.
        worker_group.execute(set_group, new_group())


@dataclass
class GroupConfig(BackendConfig):
    """Sets RAYLAB_GROUP, one id per worker group, before the loop starts."""

    @property
    def backend_cls(self):
        return _GroupBackend
