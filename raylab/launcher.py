"""Trials -> Ray Train trainers, each its own MLflow child run.

The driver reads the data once, puts it in the object store, then runs every trial of the
matrix, one after another or (--concurrency) several at once on separate nodes (raylab/matrix.py);
a trial that fails is recorded FAILED and the others still run.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

import ray

from raylab import console, matrix, prewarm
from raylab import floor as startup_floor
from raylab.backends import get_strategy
from raylab.backends.tpu import slice_scaling
from raylab.config import RunConfig, TrialSpec
from raylab.data import Dataset, put_dataset
from raylab.errors import UserError
from raylab.outcome import INTERRUPTED, INTERRUPTS, TrialOutcome, recorded
from raylab.params import common_params
from raylab.protocol import time_to_target
from raylab.recipe import Recipe
from raylab.tracking import Tracker
from raylab.worker import WorkerConfig

POLL_S = 2.0  # how often the driver logs new epochs to MLflow
# How often Ray Train's controller polls its workers (Ray's default 2 s): a trial's end is noticed up to one
# poll late, and its worker group started one poll late after a restart. The driver's value reaches the
# controller of every trial (Ray Train passes it on); a user's own setting wins. Recorded as train_poll_s.
TRAIN_POLL_ENV, TRAIN_POLL_S = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2"
# Ray Train starts a preemption watcher actor per trial (it acts on a node's drain notice, so the trial's other
# nodes go on). Where every node is this one machine (an in-process cluster, `ray start` here, a simulated
# multi-node cluster) there are no other machines to go on with, and it is one more process per trial to start:
# it is turned off there (a user's own setting wins). Recorded as train_preemption_watcher.
PREEMPTION_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
PRINT_EVERY_S = 10.0  # how often it prints a progress line between epochs


@ray.remote(num_cpus=0)
class TrialSink:
    """Where rank 0 sends progress, per-epoch metrics and its final result. Owned by the driver, so it
    outlives a worker group that Ray Train restarts: it keeps each epoch's first arrival (an epoch re-sent
    from a checkpoint after a restart is not logged twice) and each attempt's times."""

    def __init__(self, epochs: list | None = None):
        self.latest, self.epochs, self.final, self.checksums, self.nodes = None, list(epochs or []), None, {}, {}
        self.servers, self.done, self.rounds = {}, {}, {}
        self.attempts: list[dict] = []  # per worker-group attempt: start, last sign of life, last checkpoint
        self.steps_interval = None
        self.processes: list[tuple[int, str]] = []  # (pid, node ip) of the trial's worker processes

    def hello(self, pid, ip):
        """A worker process of this trial has started (raylab/prewarm.py): its output belongs to the trial."""
        self.processes.append((pid, ip))

    def pids(self):
        return list(self.processes)

    def progress(self, fields):
        self.latest = fields

    def epoch(self, fields):
        if all(e["epoch"] != fields["epoch"] for e in self.epochs):
            self.epochs.append(fields)
            self.epochs.sort(key=lambda e: e["epoch"])

    def result(self, fields):
        self.final = fields

    def checksum(self, rank, value, node_id=None):
        self.checksums[rank] = value
        self.nodes[rank] = node_id

    def poll(self):
        return self.latest, list(self.epochs), self.final

    def replica_checksums(self):
        return [self.checksums[r] for r in sorted(self.checksums)]

    def worker_nodes(self):
        return [self.nodes[r] for r in sorted(self.nodes)]

    # Restarts: rank 0 says when each attempt starts, that it is alive (every 0.5 s), when it checkpointed.
    def attempt(self, now):
        self.attempts.append({"start": now, "alive": now, "first_step": None, "checkpointed": None})

    def alive(self, now):
        a = self.attempts[-1]
        a["alive"] = now
        a["first_step"] = a["first_step"] or now

    def checkpointed(self, now):
        self.attempts[-1]["checkpointed"] = now
        self.attempts[-1]["alive"] = now

    def history(self):
        return list(self.attempts)

    def set_interval(self, steps):
        self.steps_interval = self.steps_interval or steps  # the first attempt's: every rank must agree

    def interval(self):
        return self.steps_interval

    # Parameter-server trials: hosts publish their servers, workers look them up and say when they are done;
    # names carry the worker group's id, so a restarted group never finds the dead group's servers.
    def register(self, name, handle, shard):
        self.servers[name] = (handle, shard)

    def lookup(self, names):
        return [self.servers[n] for n in names] if all(n in self.servers for n in names) else None

    def registered(self):
        return {name: shard for name, (_, shard) in self.servers.items()}

    def finish(self, group=""):
        self.done[group] = self.done.get(group, 0) + 1

    def finished(self, group=""):
        return self.done.get(group, 0)

    def report_round(self, group=""):
        self.rounds[group] = self.rounds.get(group, 0) + 1

    def report_rounds(self, group=""):
        return self.rounds.get(group, 0)


def restart_figures(attempts: list[dict]) -> dict:
    """restarts, recovery_s (a failure, as the failed attempt's last sign of life, to the next attempt's
    first step) and lost_s (the failed attempt's training after its last checkpoint, done again)."""
    recovery = lost = 0.0
    for before, after in zip(attempts, attempts[1:]):
        recovery += max(0.0, (after["first_step"] or after["alive"]) - before["alive"])
        since = before["checkpointed"] or before["first_step"] or before["alive"]
        lost += max(0.0, before["alive"] - since)
    return {"restarts": max(0, len(attempts) - 1), "recovery_s": recovery, "lost_s": lost}


def init_ray(address: str | None = None) -> None:
    """Connects to RAY_ADDRESS (e.g. under `ray job submit`) or starts an in-process cluster."""
    if ray.is_initialized():
        return
    if address and address not in ("auto", "local"):
        reachable(address)
    try:
        # "local": always a new in-process cluster; plain ray.init() would silently join any cluster
        # `ray start` left registered on this machine (even a dead one, and then hang).
        # A cluster raylab starts runs its workers at normal priority (Ray's default is nice 15, which puts
        # the training step behind Ray's own control plane on a small machine); the worker records its niceness.
        extra = {} if address else {"_system_config": {"worker_niceness": 0}}
        # Workers' output still comes to the driver; the console sends it to each trial's log file.
        ray.init(address=address or "local", log_to_driver=True, configure_logging=console.get().verbose,
                 logging_level="WARNING", **extra)
        console.get().take_worker_output()
    except Exception as e:  # noqa: BLE001 - connection, auth and start-up failures alike
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
        raise UserError(f"cannot start or reach {where} ({first}); check RAY_ADDRESS / --address, "
                        "or start one with `ray start --head`.") from None


def reachable(address: str, timeout_s: float = 10.0) -> None:
    """UserError unless something listens at a cluster address (HOST:PORT or ray://HOST:PORT): ray.init
    would otherwise wait for minutes on an address where nothing answers."""
    import socket

    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"the Ray address '{address}' is not HOST:PORT; give e.g. --address 127.0.0.1:6379, "
                        "or 'auto' for the cluster `ray start` started here.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise UserError(f"nothing answers at the Ray address {address} ({e.strerror or e}); start the cluster "
                        "(`ray start --head`) or fix --address / RAY_ADDRESS.") from None


def reservation(strategy, layout, cluster: dict) -> tuple[float, bool]:
    """(CPUs each process reserves, oversubscribed?).

    Parameter-server trials have more processes than replicas; where the cluster has fewer CPUs
    than their threads need, they still run, on an equal share of the CPUs, and say so.
    """
    cpus = cluster.get("CPU", 0)
    if strategy.ps_roles is None or layout.cpus <= cpus:
        return layout.cpus_per_worker, False
    share = cpus / layout.ray_workers
    return (int(share) if share >= 1 else int(share * 100) / 100), True


def check_resources(cfg: RunConfig) -> None:
    """Every trial must fit on the cluster, and pass its backend's checks, before any trial starts."""
    total = ray.cluster_resources()
    for spec in cfg.trials:
        strategy = get_strategy(spec.kind)
        layout = strategy.layout(spec.workers, cfg.threads, cfg.ps)
        cpus, oversubscribed = reservation(strategy, layout, total)
        if (layout.cpus > total.get("CPU", 0) and not oversubscribed) or cpus <= 0:
            raise UserError(
                f"{spec.name} needs {layout.cpus} CPUs ({layout.ray_workers} worker(s) x {layout.cpus_per_worker} "
                f"thread(s)) but the Ray cluster has {int(total.get('CPU', 0))}; lower --workers or --threads, or add nodes."
            )
        if strategy.preflight is not None:
            strategy.preflight(cfg, total)
        if strategy.resources is not None and strategy.resources(cfg, total).get("TPU"):
            slice_scaling(cfg.tpu_type, cfg.tpu_topology, layout.ray_workers)  # raises if the slice is unnamed
        if cfg.device == "gpu" and spec.workers > total.get("GPU", 0):
            raise UserError(f"{spec.name} needs {spec.workers} GPUs but the Ray cluster has "
                            f"{int(total.get('GPU', 0))}; use --device cpu or add GPU nodes.")


def trial_params(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, ds: Dataset) -> dict:
    """The MLflow params of a trial: the same names for every framework."""
    strategy = get_strategy(spec.kind)
    layout = strategy.layout(spec.workers, cfg.threads, cfg.ps)
    # A strategy whose replicas are the devices it finds (tf:tpu) logs global_batch once its worker has said.
    per_replica = recipe.per_replica(layout.replicas)
    batch = {} if strategy.replicas_found else {"global_batch": per_replica * layout.replicas}
    cpus, oversubscribed = reservation(strategy, layout, ray.cluster_resources())
    ps = {"parameter_servers": cfg.ps} if strategy.ps_roles else {}
    return {
        **common_params(recipe, cfg, ds), "trial": spec.kind, "framework": spec.framework,
        "requested_strategy": spec.strategy, "workers": spec.workers, "ray_workers": layout.ray_workers,
        "batch_per_replica": per_replica, **batch, "cpus_per_process": cpus, "oversubscribed": oversubscribed, **ps,
        "max_failures": max_failures(strategy, cfg), "checkpoint_every_min": cfg.checkpoint_every_min,
        "storage": cfg.storage or "~/ray_results", "train_poll_s": os.environ.get(TRAIN_POLL_ENV, TRAIN_POLL_S),
        "prewarm": prewarm.enabled(), "train_preemption_watcher": os.environ.get(PREEMPTION_ENV, "1") != "0",
    }


class Progress(threading.Thread):
    """Polls the sink while fit() runs: prints progress, logs each epoch as it arrives."""

    def __init__(self, sink, tracker: Tracker, run_id: str, label: str, synthetic: bool = False, log=None):
        super().__init__(daemon=True)
        self.sink, self.tracker, self.run_id, self.label, self.log = sink, tracker, run_id, label, log
        self.synthetic = synthetic  # random labels: the accuracy is chance, so it is not printed
        self.logged, self.stopping, self.last_line, self.printed = 0, threading.Event(), None, 0.0
        self.first: tuple[float, int] | None = None  # (time, steps done) at the first progress report

    def run(self):
        while not self.stopping.wait(POLL_S):
            self.poll()

    def poll(self) -> tuple[list, dict | None]:
        try:
            (latest, epochs, final), pids = ray.get([self.sink.poll.remote(), self.sink.pids.remote()], timeout=30)
        except Exception:  # noqa: BLE001 - a slow poll is retried next time
            return [], None
        if self.log is not None:
            for pid, ip in pids:
                console.get().claim(ip, pid, self.log)
        for e in epochs[self.logged :]:
            metrics = {k: v for k, v in e.items() if k != "epoch"}
            self.tracker.log_metrics(self.run_id, metrics, step=e["epoch"])
            # Synthetic data has random labels: its metrics are chance and are not printed.
            val = "" if self.synthetic else "".join(f" {k} {v:.4g}" for k, v in e.items() if k.startswith("val_"))
            console.get().line(f"[{self.label}] epoch {e['epoch']} done in {e['epoch_time_s']:.1f}s "
                               f"loss {e['train_loss']:.4f}{val}")
        self.logged = len(epochs)
        out = console.get()
        every = POLL_S if out.tty else PRINT_EVERY_S  # a bar redrawn in place; plain lines less often
        if latest and latest != self.last_line and final is None and time.monotonic() - self.printed >= every:
            now = time.monotonic()
            done, total = console.steps_done(latest)
            self.first = self.first or (now, done)
            self.last_line, self.printed = latest, now
            out.bar(self.label, latest, console.time_left(done, total, self.first, now))
        return epochs, final

    def finish(self) -> tuple[list, dict | None]:
        self.stopping.set()
        self.join(timeout=60)
        polled = self.poll()
        console.get().clear_bar()
        return polled


def train_run_name(run_id: str) -> str:
    """The Ray Train run of a trial's MLflow run: the same name under the same storage resumes from its last
    checkpoint (what --resume relies on); a new trial's run id makes a new name."""
    return f"raylab-{run_id}"


def max_failures(strategy, cfg: RunConfig) -> int:
    """The restarts a trial may make: --max-failures, or 0 where its loop cannot checkpoint (tf:ps, xla:*)."""
    return cfg.max_failures if strategy.checkpoints else 0


def worker_resources(strategy, layout, cfg: RunConfig) -> tuple[float, int, dict]:
    """(CPUs, GPUs, other resources such as TPU) each worker process of a trial reserves."""
    total = ray.cluster_resources()
    cpus, _ = reservation(strategy, layout, total)
    gpus = layout.replicas // layout.ray_workers if cfg.device == "gpu" else 0
    return cpus, gpus, strategy.resources(cfg, total) if strategy.resources else {}


def worker_env(strategy, backend, cfg: RunConfig) -> dict:
    """What a trial's worker processes get in their environment from their start (raylab/prewarm.py): what the
    framework reads at import, which now happens as the process starts, before the worker loop sets it too."""
    if strategy.name.startswith("tf:") and (cfg.device == "cpu" or strategy.ps_roles):
        return {"CUDA_VISIBLE_DEVICES": ""}  # what ran is what's recorded: no GPU may sneak into a CPU trial
        from raylab.backends.xla import worker_env as xla_env

        return xla_env(backend.pjrt, backend.threads)
    return {}


def build_trainer(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, task, refs: dict, sink, start: float,
                  run_id: str, nodes: list | None = None):
    """nodes: the matrix.Node list the trial holds when trials run at once; its workers are placed only there."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig as RayRunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    strategy = get_strategy(spec.kind)
    layout = strategy.layout(spec.workers, cfg.threads, cfg.ps)
    wcfg = WorkerConfig(
        trial=spec.name, strategy=strategy.name, task=task, data_refs=refs,
        replicas=layout.replicas, batch_per_replica=recipe.per_replica(layout.replicas),
        epochs=cfg.epochs, threads=cfg.threads, seed=cfg.seed,
        warmup_steps=recipe.warmup_steps, trial_start=start, sink=sink, device=cfg.device,
        precision=cfg.precision, tpu_fallback=cfg.tpu_fallback, ps=cfg.ps, steps_per_epoch=cfg.steps_per_epoch,
        window=cfg.window, checkpoint=max_failures(strategy, cfg) != 0, checkpoint_every_s=60 * cfg.checkpoint_every_min,
    )
    cpus, gpus, extra = worker_resources(strategy, layout, cfg)
    tpu = slice_scaling(cfg.tpu_type, cfg.tpu_topology, layout.ray_workers) if extra.get("TPU") else {}
    pinned = {"label_selector": matrix.label_selector(nodes)} if nodes and not tpu else {}
    scaling = ScalingConfig(num_workers=layout.ray_workers, use_gpu=gpus > 0, **tpu, **pinned,
                            resources_per_worker={"CPU": cpus, **({"GPU": gpus} if gpus else {}),
                                                  **extra})
    backend = strategy.backend_config(cfg.device)
    if hasattr(backend, "threads"):
        backend.threads = cfg.threads  # XLA's CPU flags follow the trial's threads
    if strategy.ps_roles == "chief":
        backend.ps = cfg.ps  # TF_CONFIG gets chief / ps / worker roles
    # Ray Train keeps the last checkpoint; a new trial's name is new, so it never resumes another's.
    run = RayRunConfig(name=train_run_name(run_id), storage_path=cfg.storage,
                       failure_config=FailureConfig(max_failures=max_failures(strategy, cfg)),
                       checkpoint_config=CheckpointConfig(num_to_keep=1),
                       worker_runtime_env=prewarm.runtime_env(spec.framework, worker_env(strategy, backend, cfg)))
    return DataParallelTrainer(strategy.worker_loop, train_loop_config={"cfg": wcfg}, backend_config=backend,
                               scaling_config=scaling, run_config=run)


def replica_agreement(sink) -> dict:
    """Whether every replica ended with the same parameters (it must, in sync). With one copy of the
    weights (one replica, asynchronous updates) there is nothing to compare: `n/a`."""
    per_rank = ray.get(sink.replica_checksums.remote(), timeout=60)
    nodes = ray.get(sink.worker_nodes.remote(), timeout=60)
    sums = [float(v) for c in per_rank if c is not None for v in (c if isinstance(c, list) else [c])]
    same = "n/a" if len(sums) < 2 else max(sums) - min(sums) <= 1e-9 * max(abs(v) for v in sums)
    return {"replicas_consistent": same, "param_checksums": ",".join(f"{v:.10g}" for v in sums),
            "worker_nodes": len(set(nodes)), "worker_node_ids": ",".join(str(n)[:12] for n in nodes)}


def sink_name(run_id: str) -> str:
    return f"raylab-sink-{run_id}"


def run_trial(recipe: Recipe, cfg: RunConfig, spec: TrialSpec, ds: Dataset, refs: dict,
              tracker: Tracker, parent_id: str, tags: dict, repeat: int = 1,
              resume: tuple[str, list] | None = None, nodes: list | None = None,
              started: Callable[[TrialOutcome], None] | None = None) -> TrialOutcome:
    """One trial as a child run. resume=(run id, epochs it logged): an interrupted trial's run goes on
    (--resume), from its last checkpoint; its logged epochs are not logged again. nodes: the nodes it holds
    while other trials run (its workers are placed there); started: told the outcome once the run exists."""
    recipe = recipe.with_batch(spec.batch)
    logged = []
    if resume:
        run_id, logged = resume
        tracker.reopen(run_id)
    else:
        run_id = tracker.start_run(spec.name, {**trial_params(recipe, cfg, spec, ds), "repeat": repeat}, tags,
                                   parent=parent_id)
    again = f", repeat {repeat}/{cfg.repeats}" if cfg.repeats > 1 else ""
    went_on = f", resumed after epoch {len(logged)}" if resume else ""
    print(f"\n=== {spec.name}: {recipe.name}, {cfg.epochs} epoch(s), {cfg.threads} thread(s)/replica{again} "
          f"(MLflow run {run_id}{went_on}) ===", flush=True)
    log = console.get().begin_trial(spec.name)
    # Named: tools and tests can find a trial. It holds the epochs already logged, so they are not sent twice.
    sink = TrialSink.options(name=sink_name(run_id)).remote(logged)
    start = time.time()
    progress = Progress(sink, tracker, run_id, spec.name, synthetic=ds.synthetic, log=log)
    progress.logged = len(logged)
    outcome = TrialOutcome(spec, run_id, "FAILED", repeat=repeat)
    if started is not None:
        started(outcome)

    def last_progress():
        if progress.is_alive():
            progress.finish()
        try:  # restarts are recorded whether the trial finished or ran out of them
            history = ray.get(sink.history.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead cluster: nothing more to learn
            return
        figures = restart_figures(history)
        outcome.result.update(figures)
        if figures["restarts"]:
            tracker.log_metrics(run_id, figures, step=0)
            tracker.set_tags(run_id, {"restarted": figures["restarts"]})
            console.get().line(f"[{spec.name}] restarted {figures['restarts']}x from its last checkpoint: "
                               f"{figures['recovery_s']:.1f}s to recover, {figures['lost_s']:.1f}s of training "
                               "done again")

    def after_end():
        console.get().end_trial(log)
        tracker.log_artifact(run_id, log)
        ray.kill(sink)

    # The sink goes after the run has ended: a dead cluster must not leave the run RUNNING.
    with recorded(outcome, tracker, before_end=last_progress, after_end=after_end, log=log):
        trainer = build_trainer(recipe, cfg, spec, recipe.task(ds.target_names), refs, sink, start, run_id, nodes)
        progress.start()
        result = trainer.fit()
        if result.checkpoint is not None:
            tracker.set_tags(run_id, {"checkpoint_path": result.checkpoint.path})
        wall = time.time() - start
        outcome.epochs, final = progress.finish()
        if final is None:
            raise RuntimeError("training ended without rank 0's final report")
        outcome.result = {**{k: v for k, v in final.items() if k != "actual"}, "wall_s": wall}
        last = outcome.epochs[-1]
        outcome.result.update({k: v for k, v in last.items() if k.startswith(("val_", "train_"))})
        reached = time_to_target(outcome.epochs, recipe.target(ds))
        outcome.result["time_to_target_s"] = reached
        floor = startup_floor.floor_for(spec.framework, startup_floor.load())  # `raylab floor` measured it here
        if floor is not None:
            outcome.result["startup_floor_s"] = floor
        # Per-epoch names already carry their history (step = epoch); log only the new ones, as single values
        # at step 0 (the MLflow UI draws those as bars, one per trial, rather than one-point lines).
        tracker.log_metrics(run_id, {k: v for k, v in outcome.result.items() if k not in last}, step=0)
        tracker.set_tags(run_id, {**final["actual"], "requested_strategy": spec.strategy, **replica_agreement(sink)})
        # What ran is what's recorded: the `strategy` param and the run name say what ran, not what was asked.
        outcome.ran = final["actual"]["actual_strategy"]
        found = {"global_batch": final["actual"]["global_batch"]} if get_strategy(spec.kind).replicas_found else {}
        tracker.log_params(run_id, {"strategy": outcome.ran, **found})
        if outcome.ran != spec.strategy:
            tracker.rename(run_id, outcome.ran_name)
            console.get().line(f"[{spec.name}] ran as {outcome.ran_name}: {final['actual'].get('fallback_reason', '')}")
        if outcome.result.get("compiles_after_warmup"):
            tracker.set_tags(run_id, {"recompiled_after_warmup": "true"})
            console.get().line(f"[{spec.name}] WARNING: {outcome.result['compiles_after_warmup']} compilation(s) "
                               "after warm-up: a training step's graph changed (shapes, control flow); see the "
                               "compile_* metrics.")
    return outcome


def schedule(cfg: RunConfig, plain: list[TrialSpec]) -> list[tuple[int, TrialSpec]]:
    """(repeat, trial spec or plain baseline's spec) in run order.

    Repeats are interleaved (A B A B ...), every other repeat in reverse (A B B A), so drift on a
    shared machine falls on every trial alike; the plain baselines sit beside the trials.
    """
    order = []
    for r in range(1, cfg.repeats + 1):
        one = [*cfg.trials, *plain]
        order += [(r, item) for item in (one if r % 2 else one[::-1])]
    return order


EPOCH_KEYS = ("epoch_time_s", "elapsed_s")  # with train_* and val_*: the metrics logged once per epoch


def logged_epochs(client, run) -> list[dict]:
    """The epochs a trial's run holds in MLflow, as the sink's epoch fields (what --resume does not log again)."""
    keys = [k for k in run.data.metrics if k in EPOCH_KEYS or k.startswith(("train_", "val_"))]
    epochs: dict[int, dict] = {}
    for key in keys:
        for m in client.get_metric_history(run.info.run_id, key):
            epochs.setdefault(m.step, {"epoch": m.step})[key] = m.value
    return [epochs[e] for e in sorted(epochs) if "epoch_time_s" in epochs[e]]


def earlier_trials(tracker: Tracker, parent: str) -> tuple[dict, dict]:
    """What an interrupted invocation left: ({trial key: finished run}, {trial key: (run id, logged epochs)} of
    trials to go on with). A plain baseline that did not finish runs again from the start: its old run ends KILLED."""
    children = tracker.client.search_runs([tracker.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    finished, unfinished = {}, {}
    for run in sorted(children, key=lambda r: r.info.start_time):
        key = run.data.tags.get("raylab.trial_key")
        if key is None:
            continue
        if run.info.status == "FINISHED":
            finished[key] = run
        elif run.data.tags.get("actual_strategy") == "plain" or run.data.params.get("trial", "").endswith(":plain"):
            if run.info.status == "RUNNING":
                tracker.end(run.info.run_id, "KILLED", "interrupted; run again by --resume")
        else:
            unfinished[key] = (run.info.run_id, logged_epochs(tracker.client, run))
    return finished, unfinished


def finished_outcome(spec: TrialSpec, repeat: int, run) -> TrialOutcome:
    """A trial an earlier run of this invocation finished, as this one reports it (not run again)."""
    outcome = TrialOutcome(spec, run.info.run_id, "FINISHED", result=dict(run.data.metrics), repeat=repeat)
    outcome.ran = run.data.tags.get("actual_strategy", spec.strategy)
    return outcome


def driver_imports(cfg: RunConfig) -> None:
    """What the driver imports to build the trials' trainers (Ray Train's trainer, each backend's config, e.g.
    ray.train.torch, which imports torch), once before the first trial rather than inside its start-up."""
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer  # noqa: F401

    for spec in cfg.trials:
        get_strategy(spec.kind).backend_config(cfg.device)


def need(cfg: RunConfig, item: TrialSpec) -> matrix.Need:
    """The nodes a matrix item needs: its worker processes' resources; a plain baseline, every node."""
    if item.strategy == "plain":
        return matrix.Need(whole=True)
    strategy = get_strategy(item.kind)
    layout = strategy.layout(item.workers, cfg.threads, cfg.ps)
    cpus, gpus, extra = worker_resources(strategy, layout, cfg)
    return matrix.Need(layout.ray_workers, {"CPU": cpus, "GPU": gpus, **extra})


def run_recipe(recipe: Recipe, cfg: RunConfig, ds: Dataset, tracker: Tracker, tags: dict) -> tuple[str, list]:
    """Runs the trial matrix under one parent run; returns (parent run id, outcomes). With cfg.resume, under that
    parent: finished trials are not run again, unfinished ones go on from their last checkpoints."""
    from raylab.baseline import baseline_specs, run_baseline

    os.environ.setdefault(TRAIN_POLL_ENV, TRAIN_POLL_S)
    one_machine = len({n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}) == 1
    if one_machine:
        os.environ.setdefault(PREEMPTION_ENV, "0")
    refs = put_dataset(ds)
    driver_imports(cfg)
    nodes = matrix.cluster_nodes()
    limit = matrix.concurrency_limit(cfg.concurrency, nodes)
    params = {"recipe": recipe.name, "trials": ",".join(s.name for s in cfg.trials), "epochs": cfg.epochs,
              "threads": cfg.threads, "seed": cfg.seed, "quick": cfg.quick, "device": cfg.device,
              "repeats": cfg.repeats, "baseline": cfg.baseline, "data": ds.name, "max_failures": cfg.max_failures,
              "concurrency": limit, "cluster_nodes": len(nodes)}
    data_tags = {"data_source": ds.source, **({"data_note": ds.note} if ds.note else {})}
    finished, unfinished = {}, {}
    if cfg.resume:
        parent = cfg.resume
        finished, unfinished = earlier_trials(tracker, parent)
        tracker.reopen(parent)
        print(f"raylab: resuming invocation {parent}: {len(finished)} trial(s) finished before are not run again, "
              f"{len(unfinished)} go on from their last checkpoint", flush=True)
    else:
        parent = tracker.start_run(f"{recipe.name} {time.strftime('%Y-%m-%d %H:%M:%S')}", params,
                                   {**tags, **data_tags})
    tracker.show_in_ui(parent)
    if cfg.concurrency != 1 and limit == 1:
        console.get().line(f"raylab: --concurrency {cfg.concurrency or 'auto'}: the cluster has {len(nodes)} node(s) "
                           "to run trials on, so they run one at a time (each trial holds whole nodes).")
    elif limit > 1:
        console.get().line(f"raylab: up to {limit} trials at a time, each on whole nodes of its own "
                           f"({len(nodes)} nodes)")
        if one_machine:
            console.get().line("raylab: WARNING: every node is on this one machine (a simulated cluster): trials "
                               "that run at the same time share its cores, so their timings are not comparable "
                               "with trials run alone; recorded as the tag shared_machine=true.")
    outcomes, status = [], "FAILED"
    plain = baseline_specs(cfg) if cfg.baseline else []
    held = matrix.Nodes(nodes, limit)
    active: list[TrialOutcome] = []  # trials whose runs are open (they end KILLED on an interrupt)
    spans: dict[int, tuple[float, float]] = {}  # outcome index -> (start, end) wall time
    holding: dict[int, list] = {}
    errors: list[BaseException] = []

    def one(index: int, repeat: int, item: TrialSpec, key: str, taken: list) -> None:
        trial_tags = {**tags, **data_tags, "raylab.trial_key": key}
        t0, mine = time.time(), []

        def started(outcome: TrialOutcome) -> None:
            mine.append(outcome)
            active.append(outcome)

        try:
            if item.strategy == "plain":
                outcome = run_baseline(recipe, cfg, ds, item, tracker, parent, trial_tags, repeat, started=started)
            else:
                outcome = run_trial(recipe, cfg, item, ds, refs, tracker, parent, trial_tags, repeat,
                                    resume=unfinished.get(key), nodes=taken if limit > 1 else None,
                                    started=started)
            outcomes[index] = outcome
        except BaseException as e:  # noqa: BLE001 - an interrupt or a driver error: the main thread re-raises
            errors.append(e)
        finally:
            spans[index] = (t0, time.time())
            for o in mine:  # its run has ended (recorded() always ends it): not ended again on an interrupt
                active.remove(o)
            held.give(taken)

    threads: list[threading.Thread] = []
    try:
        for repeat, item in schedule(cfg, plain):
            key = f"{item.name}#{repeat}"
            if key in finished:
                outcomes.append(finished_outcome(item, repeat, finished[key]))
                continue
            taken = held.take(need(cfg, item), item.name)
            if errors:
                held.give(taken)
                break
            index = len(outcomes)
            outcomes.append(None)
            holding[index] = taken if limit > 1 else nodes  # one at a time: the trial has the whole cluster
            if limit == 1:  # one at a time, in this thread, as always
                one(index, repeat, item, key, taken)
            else:
                t = threading.Thread(target=one, args=(index, repeat, item, key, taken), daemon=True,
                                     name=f"raylab-trial-{index}")
                t.start()
                threads.append(t)
        for t in threads:
            while t.is_alive():
                t.join(timeout=1.0)
        if errors:
            raise errors[0]
        record_overlaps(tracker, outcomes, spans, holding, cfg.repeats, shared=one_machine and limit > 1)
        status = "FINISHED" if all(o.status == "FINISHED" for o in outcomes) else "FAILED"
    except INTERRUPTS:
        status = "KILLED"
        INTERRUPTED.set()  # trials still running end KILLED, not FAILED, when the cluster goes
        for o in list(active):
            tracker.end(o.run_id, "KILLED", "interrupted (Ctrl-C or SIGTERM)")
        raise
    finally:
        outcomes[:] = [o for o in outcomes if o is not None]
        failed = [o.spec.name for o in outcomes if o.status != "FINISHED"]
        tracker.set_tags(parent, {"failed_trials": ",".join(failed) or "none",
                                  **({"resumed": "true"} if cfg.resume else {})})
        tracker.end(parent, status)
    return parent, outcomes


def record_overlaps(tracker: Tracker, outcomes: list, spans: dict, holding: dict, repeats: int,
                    shared: bool = False) -> None:
    """Each trial's nodes held and the trials it overlapped with (tags), and its node count (metric). shared:
    the nodes are one machine's, so trials that overlapped shared its cores (tag shared_machine=true)."""
    names = {i: o.spec.name if repeats == 1 else f"{o.spec.name}#{o.repeat}"
             for i, o in enumerate(outcomes) if o is not None and i in spans}
    overlapped = matrix.overlaps({names[i]: spans[i] for i in names})
    for i, name in names.items():
        o, taken = outcomes[i], holding.get(i, [])
        with_ = overlapped[name]
        o.result.update({"nodes_held": len(taken), "overlapped_with": ",".join(with_)})
        tracker.set_tags(o.run_id, {"node_ids_held": ",".join(n.id[:12] for n in taken),
                                    "overlapped_with": ",".join(with_) or "none",
                                    **({"shared_machine": "true"} if shared and with_ else {}),
                                    "trial_started": f"{spans[i][0]:.3f}", "trial_ended": f"{spans[i][1]:.3f}"})
        tracker.log_metrics(o.run_id, {"nodes_held": len(taken)}, step=0)
