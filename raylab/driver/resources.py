"""What a trial reserves on the Ray cluster, and the check that every trial fits before any starts."""

from __future__ import annotations

import ray

from raylab.config import Settings, TrialSpec
from raylab.driver import matrix
from raylab.errors import UserError
from raylab.record.prices import ACCELERATOR
from raylab.tpu import slice_scaling


def reservation(strategy, layout, cluster: dict, streamed: bool = False) -> tuple[float, bool]:
    """(CPUs each process reserves, oversubscribed?).

    Parameter-server trials have more processes than replicas; where the cluster has fewer CPUs
    than their threads need, they still run, on an equal share of the CPUs, and say so.
    A streamed trial leaves one CPU to Ray Data, which gets none of the CPUs Ray Train reserved (its reads
    would wait forever): where the workers' threads would take every CPU, each worker reserves an equal share
    of the rest and still runs its threads, and the trial says it is oversubscribed.
    """
    cpus = cluster.get("CPU", 0) - (DATA_CPUS if streamed else 0)
    if (strategy.ps_roles is None and not streamed) or layout.cpus <= cpus:
        return layout.cpus_per_worker, False
    share = max(cpus, 0) / layout.ray_workers
    return (int(share) if share >= 1 else int(share * 100) / 100), True


DATA_CPUS = 1  # CPUs a streamed trial leaves free for Ray Data's read and map tasks


def worker_resources(strategy, layout, cfg: Settings) -> tuple[float, int, dict]:
    """(CPUs, GPUs, other resources such as TPU) each worker process of a trial reserves: on a trial's own accelerator
    type (cfg.on(spec)), a sliver of the nodes' `accelerator_type:TYPE` (Ray's own way of asking for one)."""
    total = ray.cluster_resources()
    cpus, _ = reservation(strategy, layout, total, cfg.streamed)
    gpus = layout.replicas // layout.ray_workers if cfg.device == "gpu" else 0
    extra = strategy.resources(cfg, total) if strategy.resources else {}
    if cfg.accelerator_type:
        extra = {**extra, ACCELERATOR + cfg.accelerator_type: ACCELERATOR_SLIVER}
    return cpus, gpus, extra


ACCELERATOR_SLIVER = 0.001  # what a worker asks of its node's accelerator_type:TYPE (1 a node), as Ray's own options do


def check_resources(cfg: Settings) -> None:
    """Every trial must fit on the cluster, and pass its backend's checks, before any trial starts."""
    total = ray.cluster_resources()
    for spec in cfg.trials:
        check_trial(cfg.on(spec), spec, total)


def check_trial(cfg: Settings, spec: TrialSpec, total: dict) -> None:
    strategy = spec.strategy
    layout = spec.layout(cfg)
    cpus, oversubscribed = reservation(strategy, layout, total, cfg.streamed)
    if cfg.streamed and total.get("CPU", 0) <= DATA_CPUS:
        raise UserError(
            f"a streamed trial needs a CPU for Ray Data beside its workers, but the Ray cluster has "
            f"{int(total.get('CPU', 0))}; add a CPU (ray start --num-cpus) or run without --data."
        )
    if (layout.cpus > total.get("CPU", 0) and not oversubscribed) or cpus <= 0:
        raise UserError(
            f"{spec.name} needs {layout.cpus} CPUs ({layout.ray_workers} worker(s) x {layout.cpus_per_worker} "
            f"thread(s)) but the Ray cluster has {int(total.get('CPU', 0))}; lower --workers or --threads, "
            "or add nodes."
        )
    if strategy.preflight is not None:
        strategy.preflight(cfg, total)
    if strategy.resources is not None and strategy.resources(cfg, total).get("TPU"):
        slice_scaling(cfg.tpu_type, cfg.tpu_topology, layout.ray_workers)  # raises if the slice is unnamed
    if cfg.device == "gpu" and spec.workers > total.get("GPU", 0):
        raise UserError(
            f"{spec.name} needs {spec.workers} GPUs but the Ray cluster has "
            f"{int(total.get('GPU', 0))}; use --device cpu or add GPU nodes."
        )
    if cfg.accelerator_type and ACCELERATOR + cfg.accelerator_type not in total:
        types = sorted(k[len(ACCELERATOR) :] for k in total if k.startswith(ACCELERATOR))
        raise UserError(
            f"{spec.name} asks for nodes of accelerator type {cfg.accelerator_type}, but no node of the "
            f"Ray cluster has one (its types: {', '.join(types) or 'none'}); name one of those, or add "
            f"a node started with --resources '{{\"{ACCELERATOR}{cfg.accelerator_type}\": 1}}'."
        )


def need(cfg: Settings, item: TrialSpec) -> matrix.Need:
    """The nodes a matrix item needs: its worker processes' resources; a plain script, every node."""
    if item.short == "plain":
        return matrix.Need(whole=True)
    strategy = item.strategy
    layout = item.layout(cfg)
    cpus, gpus, extra = worker_resources(strategy, layout, cfg.on(item))
    return matrix.Need(layout.ray_workers, {"CPU": cpus, "GPU": gpus, **extra})
