"""A trial's Ray Train trainer: its workers' config, their resources and placement, its backend, its run.

A strategy's kind, short name and trial name: docs/architecture.md, "Names". Test the framework with
`strategy.framework`, never with the short name.
"""

from __future__ import annotations

from raylab.frameworks import prewarm
from raylab.driver.policy import Policy, StartGuard
from raylab.loop.guard import guard
from raylab.config import Settings, TrialSpec, compile_cache_dir
from raylab.driver import matrix
from raylab.runtime import cluster
from raylab.settings import resolve
from raylab.driver.resources import worker_resources
from raylab.loop.worker_config import WorkerConfig
from raylab.task.recipe import Recipe
from raylab.tpu import slice_scaling


def train_run_name(run_id: str) -> str:
    """The Ray Train run of a trial's MLflow run: the same name under the same storage resumes from its last
    checkpoint (what --resume relies on); a new trial's run id makes a new name."""
    return f"raylab-{run_id}"


def worker_env(strategy, backend, cfg: Settings) -> dict:
    """What a trial's worker processes get in their environment from their start (raylab/frameworks/prewarm.py): what
    the framework reads at import, which now happens as the process starts, before the worker loop sets it too."""
    return strategy.worker_env(backend, cfg) if strategy.worker_env else {}


def worker_config(
    recipe: Recipe, cfg: Settings, spec: TrialSpec, task, shared: dict, sink, start: float, run_id: str = ""
) -> WorkerConfig:
    """The small picklable config every worker of the trial receives: its settings as resolve.trial resolved them."""
    resolved = resolve.trial(cfg, spec)
    layout = resolved.layout
    return WorkerConfig(
        trial=spec.name,
        short=resolved.strategy.short,
        task=task,
        shared=getattr(shared, "info", shared),
        replicas=layout.replicas,
        batch_per_replica=recipe.per_replica(layout.replicas),
        epochs=cfg.epochs,
        threads=resolved.threads,
        seed=cfg.seed,
        warmup_steps=recipe.warmup_steps,
        trial_start=start,
        sink=sink,
        device=resolved.device,
        precision=resolved.precision,
        tpu_fallback=cfg.tpu_fallback,
        ps=cfg.ps,
        steps_per_epoch=cfg.steps_per_epoch,
        seconds=None if cfg.probe else cfg.seconds,
        window=cfg.window,
        checkpoint=cfg.max_failures != 0,
        checkpoint_every_s=60 * cfg.checkpoint_every_min,
        memory_cap_mb=cfg.memory_cap_mb,
        profile=cfg.profile,
        probe=cfg.probe,
        execution=resolved.execution,
        compile_cache=compile_cache_dir(cfg, run_id),
        run_id=run_id,
        storage=cfg.storage,
    )


def scaling_config(cfg: Settings, spec: TrialSpec, nodes: list | None, share: int = 1):
    """Its worker processes and what each reserves; nodes: the matrix.Node list the trial holds when trials
    run at once (its workers are placed only there); share: a warm group's workers reserve 1/share of their CPUs
    and GPUs (raylab/driver/groups.py)."""
    from ray.train import ScalingConfig

    strategy = spec.strategy
    layout = spec.layout(cfg)
    cpus, gpus, extra = worker_resources(strategy, layout, cfg)
    cpus, gpus = (round(cpus / share, 4), round(gpus / share, 4)) if share > 1 else (cpus, gpus)
    tpu = slice_scaling(cfg.tpu_type, cfg.tpu_topology, layout.ray_workers) if extra.get("TPU") else {}
    pinned = {"label_selector": matrix.label_selector(nodes)} if nodes and not tpu else {}
    return ScalingConfig(
        num_workers=layout.ray_workers,
        use_gpu=gpus > 0,
        **tpu,
        **pinned,
        resources_per_worker={"CPU": cpus, **({"GPU": gpus} if gpus else {}), **extra},
    )


def backend_config(strategy, cfg: Settings):
    backend = strategy.backend_config(cfg.device)
    if hasattr(backend, "threads"):
        backend.threads = cfg.threads  # XLA's CPU flags follow the trial's threads
    if strategy.ps_roles == "chief":
        backend.ps = cfg.ps  # TF_CONFIG gets chief / ps / worker roles
    return backend


def build_trainer(
    recipe: Recipe,
    cfg: Settings,
    spec: TrialSpec,
    task,
    shared: dict,
    sink,
    start: float,
    run_id: str,
    nodes: list | None = None,
    train_run: str | None = None,
):
    """nodes: the matrix.Node list the trial holds when trials run at once; its workers are placed only there;
    train_run: the Ray Train run to go on with (--resume of a trial that ran in a warm group)."""
    wcfg = worker_config(recipe, cfg, spec, task, shared, sink, start, run_id)
    return trainer(
        cfg,
        spec,
        guard(spec.strategy.worker_loop),
        {"cfg": wcfg},
        sink,
        train_run or train_run_name(run_id),
        scaling_config(cfg, spec, nodes),
        **datasets(shared),
    )


def build_group_trainer(cfg: Settings, spec: TrialSpec, queue, name: str, share: int):
    """A warm worker group's Ray Train run (raylab/driver/groups.py): its workers run the trials the queue hands
    them (raylab/loop/group_worker.py); the failures Ray Train reports go to the trial running, through the queue."""
    from raylab.loop.group_worker import group_loop

    return trainer(cfg, spec, group_loop, {"queue": queue}, queue, name, scaling_config(cfg, spec, None, share))


def trainer(cfg: Settings, spec: TrialSpec, loop, loop_config: dict, sink, name: str, scaling, **data):
    """The Ray Train trainer of a trial or a warm group: `sink` hears its failures, `name` is its Ray Train run."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    strategy = spec.strategy
    backend = backend_config(strategy, cfg)
    # Ray Train keeps the last checkpoint (every one with --keep-checkpoints all); a new trial's name is new, so it
    # never resumes another's. What outlives the trial: raylab/driver/retention.py.
    keep = None if cfg.keep_checkpoints == "all" else 1
    run_config = RunConfig(
        name=name,
        storage_path=cfg.storage,
        failure_config=FailureConfig(max_failures=cfg.max_failures),
        checkpoint_config=CheckpointConfig(num_to_keep=keep),
        worker_runtime_env=prewarm.runtime_env(spec.framework, worker_env(strategy, backend, cfg)),
    )
    trainer_class = guarded_trainer_class(DataParallelTrainer, sink, capped=cfg.memory_cap_mb is not None)
    return trainer_class(
        loop,
        train_loop_config=loop_config,
        backend_config=backend,
        scaling_config=scaling,
        run_config=run_config,
        **data,
    )


def guarded_trainer_class(base, sink, capped: bool = False):
    """Ray Train's trainer with raylab's failure policy (raylab/driver/policy.py): what the trial's own code raised
    ends it at once; only lost processes spend the restart budget. (Ray Train 2.60 builds its policy inside
    fit(); this is the one place raylab reaches past its public API, pinned by the version it installs, with the
    default callbacks less the placement-group cleaner where the driver owns the cluster, and StartGuard
    first.)"""

    class GuardedTrainer(base):
        def _initialize_and_run_controller(self, **kwargs):
            kwargs["failure_policy"] = Policy(self.run_config.failure_config, sink, capped)
            return super()._initialize_and_run_controller(**kwargs)

        def _create_default_callbacks(self):
            # No placement-group cleaner where the driver's death ends the cluster anyway (cluster.owns_cluster);
            # first, StartGuard: a worker group whose set-up failed is ended, not left holding its CPUs.
            callbacks = super()._create_default_callbacks()
            if cluster.owns_cluster():
                callbacks = [c for c in callbacks if type(c).__name__ != "PlacementGroupCleanerCallback"]
            return [StartGuard(), *callbacks]

    return GuardedTrainer


def datasets(shared) -> dict:
    """A streamed dataset goes to Ray Train: the train split split equally between the workers, the test split
    whole to each (rank 0 reads it)."""
    if not hasattr(shared, "datasets"):
        return {}
    from ray.train import DataConfig

    return {"datasets": shared.datasets, "dataset_config": DataConfig(datasets_to_split=["train"])}
