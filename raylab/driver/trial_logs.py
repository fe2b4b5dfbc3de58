"""What a trial logs to MLflow beside its figures: its params as its child run opens (the same names for every
framework; what every child run shares: raylab/record/params.py common_params), and at its end a streamed trial's
Ray Data statistics and --profile's trace as artifacts."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import ray

from raylab.config import Settings, TrialSpec
from raylab.data import Dataset
from raylab.driver.resources import reservation
from raylab.frameworks import prewarm
from raylab.probes import race
from raylab.record.params import common_params
from raylab.runtime import cluster, console
from raylab.task.recipe import Recipe


def trial_params(recipe: Recipe, cfg: Settings, spec: TrialSpec, ds: Dataset) -> dict:
    """The MLflow params of a trial: the same names for every framework."""
    strategy = spec.strategy
    layout = spec.layout(cfg)
    # A strategy whose replicas are the devices it finds (tf:tpu) logs global_batch once its worker has said.
    per_replica = recipe.per_replica(layout.replicas)
    batch = {} if strategy.replicas_found else {"global_batch": per_replica * layout.replicas}
    total = ray.cluster_resources()
    cpus, oversubscribed = reservation(strategy, layout, total, cfg.streamed)
    data_cpus = {"data_cpus": round(total.get("CPU", 0) - cpus * layout.ray_workers, 2)} if cfg.streamed else {}
    ps = {"parameter_servers": cfg.ps} if strategy.ps_roles else {}
    return {
        **common_params(recipe, cfg, ds),
        "trial": spec.kind,
        "framework": spec.framework,
        "requested_strategy": spec.short,
        "workers": spec.workers,
        "ray_workers": layout.ray_workers,
        "batch_per_replica": per_replica,
        **batch,
        "cpus_per_process": cpus,
        "oversubscribed": oversubscribed,
        **ps,
        **data_cpus,
        "max_failures": cfg.max_failures,
        "checkpoint_every_min": cfg.checkpoint_every_min,
        **({"memory_cap_mb": cfg.memory_cap_mb} if cfg.memory_cap_mb else {}),
        "storage": cfg.storage or "~/ray_results",
        "keep_checkpoints": cfg.keep_checkpoints,
        "train_poll_s": os.environ.get(cluster.TRAIN_POLL_ENV, cluster.TRAIN_POLL_S),
        "prewarm": prewarm.enabled(),
        "train_preemption_watcher": os.environ.get(cluster.PREEMPTION_ENV, "1") != "0",
        "train_off": cluster.train_off(),
        "execution": spec.executes(),
        "compiled": spec.compiled(),
        "compile_cache": cfg.compile_cache,
        **race.params(recipe, cfg, spec),
    }


def data_stats(tracker, run_id: str, stats: str | None) -> None:
    """A streamed trial's Ray Data iterator statistics (rank 0's), as the artifact ray_data_stats.txt."""
    if stats:
        path = Path(tempfile.mkdtemp(prefix="raylab-stats-")) / "ray_data_stats.txt"
        path.write_text(stats)
        tracker.log_artifact(run_id, path)


def profile(tracker, run_id: str, sink, asked: bool, spec) -> None:
    """--profile: rank 0's profiled window, its trace and profile_summary.txt as artifacts under profile/,
    and the tag `profiled` (that window ran under the profiler, slower than the others)."""
    if not asked:
        return
    got = ray.get(sink.profiled.remote(), timeout=60)
    if got is None:
        why = (
            "has no profiler hook"
            if spec.strategy.ps_roles
            else "reached no steady window to profile (fewer steps than the warm-up and one window)"
        )
        tracker.set_tags(run_id, {"profiled": f"no: {spec.kind} {why}"})
        return
    files, what = got
    root = Path(tempfile.mkdtemp(prefix="raylab-profile-"))
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        tracker.log_artifact(run_id, path, Path("profile", name).parent.as_posix())
    tracker.set_tags(run_id, {"profiled": what})
    summary = root / "profile_summary.txt"
    if summary.exists():
        console.get().line(f"[{spec.name}] profiled {what}: profile/profile_summary.txt")
