"""Trials -> Ray Train trainers, one after another, each its own MLflow child run.

The driver reads the data once, puts it in the object store, then runs every trial of the
matrix; a trial that fails is recorded FAILED and the next one still runs.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field

import ray

from raylab.backends import get_strategy
from raylab.config import RunConfig, TrialSpec
from raylab.data import Dataset, put_dataset
from raylab.errors import UserError
from raylab.recipe import Recipe
from raylab.tracking import Tracker, error_summary
from raylab.worker import WorkerConfig

POLL_S = 2.0  # how often the driver logs new epochs to MLflow
PRINT_EVERY_S = 10.0  # how often it prints a progress line between epochs


@ray.remote(num_cpus=0)
class TrialSink:
    """Where rank 0 sends progress, per-epoch metrics and its final result."""

    def __init__(self):
        self.latest, self.epochs, self.final, self.checksums = None, [], None, {}

    def progress(self, fields):
        self.latest = fields

    def epoch(self, fields):
        self.epochs.append(fields)

    def result(self, fields):
        self.final = fields

    def checksum(self, rank, value):
        self.checksums[rank] = value

    def poll(self):
        return self.latest, list(self.epochs), self.final

    def replica_checksums(self):
        return [self.checksums[r] for r in sorted(self.checksums)]


@dataclass
class TrialOutcome:
    spec: TrialSpec
    run_id: str
    status: str  # FINISHED, FAILED or KILLED
    result: dict = field(default_factory=dict)
    epochs: list = field(default_factory=list)
    error: str | None = None


def init_ray(address: str | None = None) -> None:
    """Connects to RAY_ADDRESS (e.g. under `ray job submit`) or starts an in-process cluster."""
    if ray.is_initialized():
        return
    try:
        # "local": always a new in-process cluster; plain ray.init() would silently join any cluster
        # `ray start` left registered on this machine (even a dead one, and then hang).
        # A cluster raylab starts runs its workers at normal priority (Ray's default is nice 15, which puts
        # the training step behind Ray's own control plane on a small machine); the worker records its niceness.
        extra = {} if address else {"_system_config": {"worker_niceness": 0}}
        ray.init(address=address or "local", log_to_driver=True, configure_logging=True, logging_level="WARNING",
                 **extra)
    except Exception as e:  # noqa: BLE001 - connection, auth and start-up failures alike
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise UserError(f"cannot start or reach {where} ({first}); check RAY_ADDRESS / --address, "
                        "or start one with `ray start --head`.") from None


def check_resources(cfg: RunConfig) -> None:
    """Every trial must fit on the cluster, and pass its backend's checks, before any trial starts."""
    total = ray.cluster_resources()
    for spec in cfg.trials:
        strategy = get_strategy(spec.kind)
        layout = strategy.layout(spec.workers, cfg.threads)
        if layout.cpus > total.get("CPU", 0):
            raise UserError(
                f"{spec.name} needs {layout.cpus} CPUs ({layout.ray_workers} worker(s) x {layout.cpus_per_worker} "
                f"thread(s)) but the Ray cluster has {int(total.get('CPU', 0))}; lower --workers or --threads, or add nodes."
            )
        if strategy.preflight is not None:
            strategy.preflight(cfg, total)
        if cfg.device == "gpu" and spec.workers > total.get("GPU", 0):
            raise UserError(f"{spec.name} needs {spec.workers} GPUs but the Ray cluster has "
                            f"{int(total.get('GPU', 0))}; use --device cpu or add GPU nodes.")


def trial_params(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, ds: Dataset) -> dict:
    """The MLflow params of a trial: the same names for every framework."""
    layout = get_strategy(spec.kind).layout(spec.workers, cfg.threads)
    return {
        "recipe": recipe.name, "trial": spec.kind, "framework": spec.framework, "strategy": spec.strategy,
        "workers": spec.workers, "ray_workers": layout.ray_workers, "batch_per_replica": recipe.batch_per_replica,
        "global_batch": recipe.batch_per_replica * layout.replicas, "lr": recipe.lr, "optimizer": "adam",
        "adam_epsilon": recipe.adam_epsilon, "epochs": cfg.epochs, "threads": cfg.threads, "seed": cfg.seed,
        "precision": cfg.precision, "device": cfg.device, "quick": cfg.quick, "data": ds.name,
        "data_synthetic": ds.synthetic, "train_samples": len(ds.x_train), "test_samples": len(ds.x_test),
        "warmup_steps": recipe.warmup_steps,
    }


class Progress(threading.Thread):
    """Polls the sink while fit() runs: prints progress, logs each epoch as it arrives."""

    def __init__(self, sink, tracker: Tracker, run_id: str, label: str):
        super().__init__(daemon=True)
        self.sink, self.tracker, self.run_id, self.label = sink, tracker, run_id, label
        self.logged, self.stopping, self.last_line, self.printed = 0, threading.Event(), None, 0.0

    def run(self):
        while not self.stopping.wait(POLL_S):
            self.poll()

    def poll(self) -> tuple[list, dict | None]:
        try:
            latest, epochs, final = ray.get(self.sink.poll.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a slow poll is retried next time
            return [], None
        for e in epochs[self.logged :]:
            metrics = {k: v for k, v in e.items() if k != "epoch"}
            self.tracker.log_metrics(self.run_id, metrics, step=e["epoch"])
            val = f" val_acc {e['val_accuracy']:.4f}" if "val_accuracy" in e else ""
            print(f"[{self.label}] epoch {e['epoch']} done in {e['epoch_time_s']:.1f}s "
                  f"loss {e['train_loss']:.4f}{val}", flush=True)
        self.logged = len(epochs)
        if latest and latest != self.last_line and final is None and time.monotonic() - self.printed >= PRINT_EVERY_S:
            self.last_line, self.printed = latest, time.monotonic()
            print(f"[{self.label}] epoch {latest['epoch']}/{latest['epochs']} step {latest['step']}/{latest['steps']} "
                  f"{latest['samples_per_sec']:,.0f} samples/s loss {latest['loss']:.4f}", flush=True)
        return epochs, final

    def finish(self) -> tuple[list, dict | None]:
        self.stopping.set()
        self.join(timeout=60)
        return self.poll()


def build_trainer(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, refs: dict, sink, start: float):
    from ray.train import FailureConfig, RunConfig as RayRunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    strategy = get_strategy(spec.kind)
    layout = strategy.layout(spec.workers, cfg.threads)
    wcfg = WorkerConfig(
        trial=spec.name, strategy=strategy.name, build_model=recipe.models[strategy.models], data_refs=refs,
        replicas=layout.replicas, batch_per_replica=recipe.batch_per_replica, lr=recipe.lr,
        adam_epsilon=recipe.adam_epsilon, epochs=cfg.epochs, threads=cfg.threads, seed=cfg.seed,
        warmup_steps=recipe.warmup_steps, trial_start=start, sink=sink, device=cfg.device,
        precision=cfg.precision,
    )
    gpus = layout.replicas // layout.ray_workers if cfg.device == "gpu" else 0
    scaling = ScalingConfig(num_workers=layout.ray_workers, use_gpu=gpus > 0,
                            resources_per_worker={"CPU": layout.cpus_per_worker, **({"GPU": gpus} if gpus else {})})
    # Unique names: re-using a name + storage path silently resumes an old run (DESIGN.md).
    name = f"raylab-{recipe.name}-{spec.framework}-{spec.strategy}-x{spec.workers}-{uuid.uuid4().hex[:8]}"
    return DataParallelTrainer(
        strategy.worker_loop, train_loop_config={"cfg": wcfg}, backend_config=strategy.backend_config(cfg.device),
        scaling_config=scaling, run_config=RayRunConfig(name=name, failure_config=FailureConfig(max_failures=0)),
    )


def replica_agreement(sink) -> dict:
    """Whether every worker ended with the same parameters (it must, under all-reduce)."""
    sums = ray.get(sink.replica_checksums.remote(), timeout=60)
    same = len(sums) > 0 and max(sums) - min(sums) <= 1e-9 * max(abs(v) for v in sums)
    return {"replicas_consistent": same, "param_checksums": ",".join(f"{v:.10g}" for v in sums)}


def error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).strip()


def run_trial(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, ds: Dataset, refs: dict,
              tracker: Tracker, parent_id: str, tags: dict) -> TrialOutcome:
    run_id = tracker.start_run(spec.name, trial_params(recipe, cfg, spec, ds), tags, parent=parent_id)
    print(f"\n=== {spec.name}: {recipe.name}, {cfg.epochs} epoch(s), {cfg.threads} thread(s)/replica "
          f"(MLflow run {run_id}) ===", flush=True)
    sink = TrialSink.remote()
    start = time.time()
    progress = Progress(sink, tracker, run_id, spec.name)
    outcome = TrialOutcome(spec, run_id, "FAILED")
    try:
        trainer = build_trainer(recipe, cfg, spec, refs, sink, start)
        progress.start()
        trainer.fit()
        wall = time.time() - start
        outcome.epochs, final = progress.finish()
        if final is None:
            raise RuntimeError("training ended without rank 0's final report")
        outcome.result = {**{k: v for k, v in final.items() if k != "actual"}, "wall_s": wall}
        last = outcome.epochs[-1]
        outcome.result.update({k: last[k] for k in ("val_accuracy", "val_loss", "train_loss", "train_accuracy")})
        # Per-epoch names already carry their history (step = epoch); log only the new ones.
        tracker.log_metrics(run_id, {k: v for k, v in outcome.result.items() if k not in last}, step=cfg.epochs)
        tracker.set_tags(run_id, {**final["actual"], **replica_agreement(sink)})
        if outcome.result.get("compiles_after_warmup"):
            tracker.set_tags(run_id, {"recompiled_after_warmup": "true"})
            print(f"[{spec.name}] WARNING: {outcome.result['compiles_after_warmup']} compilation(s) after warm-up: "
                  "a training step's graph changed (shapes, control flow); see the compile_* metrics.", flush=True)
        outcome.status = "FINISHED"
    except KeyboardInterrupt:
        outcome.status, outcome.error = "KILLED", "interrupted (Ctrl-C or SIGTERM)"
        raise
    except Exception as e:  # noqa: BLE001 - a failed trial is recorded, the next one still runs
        outcome.error = error_text(e)
        print(f"[{spec.name}] FAILED: {error_summary(outcome.error)}", file=sys.stderr, flush=True)
    finally:
        if progress.is_alive():
            progress.finish()
        tracker.end(run_id, outcome.status, outcome.error)
        ray.kill(sink)
    return outcome


def run_recipe(recipe: Recipe, cfg: RunConfig, ds: Dataset, tracker: Tracker, tags: dict) -> tuple[str, list]:
    """Runs the trial matrix under one parent run; returns (parent run id, outcomes)."""
    refs = put_dataset(ds)
    params = {"recipe": recipe.name, "trials": ",".join(s.name for s in cfg.trials), "epochs": cfg.epochs,
              "threads": cfg.threads, "seed": cfg.seed, "quick": cfg.quick, "device": cfg.device}
    parent = tracker.start_run(f"{recipe.name} {time.strftime('%Y-%m-%d %H:%M:%S')}", params, tags)
    outcomes, status = [], "FAILED"
    try:
        for spec in cfg.trials:
            outcomes.append(run_trial(recipe, cfg, spec, ds, refs, tracker, parent, tags))
        status = "FINISHED" if all(o.status == "FINISHED" for o in outcomes) else "FAILED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        failed = [o.spec.name for o in outcomes if o.status != "FINISHED"]
        tracker.set_tags(parent, {"failed_trials": ",".join(failed) or "none"})
        tracker.end(parent, status)
    return parent, outcomes
