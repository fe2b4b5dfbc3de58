"""One invocation of a recipe: its parent run (new, or reopened by --resume), the data hand-off, then the matrix.

The driver reads the data once and puts it in the object store (raylab/data/__init__.py), or opens a stream of it
(raylab/data/stream.py), then runs every trial of the
matrix, one after another or (--concurrency) several at once on separate nodes (raylab/driver/matrix.py); a trial
that fails is recorded FAILED and the others still run (raylab/driver/trial.py, raylab/driver/plain_runs.py).
"""

from __future__ import annotations

import time

from raylab.config import Settings, TrialSpec, remove_compile_cache
from raylab.data import Dataset, put_dataset
from raylab.driver import hold, matrix
from raylab.runtime import cluster, console
from raylab.probes import race
from raylab.driver.plain_runs import plain_specs, run_plain_item
from raylab.driver.retention import Kept
from raylab.driver.outcome import INTERRUPTS, TrialOutcome
from raylab.driver.resources import need
from raylab.record.tracking import Tracker
from raylab.driver.trial import run_trial
from raylab.driver.groups import Groups
from raylab.task.recipe import Recipe

EPOCH_KEYS = (
    "epoch_time_s",
    "elapsed_s",
    "epoch_input_wait_s",
)  # with train_* and val_*: the metrics logged once per epoch


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
    trials to go on with). A plain script that did not finish runs again from the start: its old run ends KILLED."""
    children = tracker.client.search_runs(
        [tracker.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'"
    )
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
            unfinished[key] = (run.info.run_id, logged_epochs(tracker.client, run), run.data.tags.get("train_run"))
    return finished, unfinished


def finished_outcome(spec: TrialSpec, repeat: int, run) -> TrialOutcome:
    """A trial an earlier run of this invocation finished, as this one reports it (not run again)."""
    outcome = TrialOutcome(spec, run.info.run_id, "FINISHED", result=dict(run.data.metrics), repeat=repeat)
    outcome.ran = run.data.tags.get("actual_strategy", spec.short)
    return outcome


class Invocation:
    """The parent run and what every item of its matrix shares: recipe, config, data, tracker, tags."""

    def __init__(self, recipe: Recipe, cfg: Settings, ds: Dataset, tracker: Tracker, tags: dict):
        self.recipe, self.cfg, self.ds, self.tracker = recipe, cfg, ds, tracker
        self.tags = {**tags, "data_source": ds.source, **({"data_note": ds.note} if ds.note else {})}
        self.parent = ""  # the parent MLflow run, once open
        self.shared: dict = {}  # the data's object shared, once handed off
        self.unfinished: dict = {}  # --resume: trial key -> (run id, epochs it logged, its Ray Train run)
        self.groups = None  # the warm worker groups (raylab/driver/groups.py), once the cluster is known
        self.kept: Kept | None = None  # what becomes of the trials' checkpoints (raylab/driver/retention.py)
        self.hold = hold.Hold("")  # its nodes, held against other jobs (raylab/driver/hold.py)

    def open_parent(self, limit: int, nodes: list) -> dict:
        """Starts the parent run, or reopens the one --resume names; returns {trial key: finished outcome}."""
        cfg, ds = self.cfg, self.ds
        if not cfg.resume:
            params = {
                "recipe": self.recipe.name,
                "trials": ",".join(s.name for s in cfg.trials),
                "epochs": cfg.epochs,
                "threads": cfg.threads,
                "seed": cfg.seed,
                "quick": cfg.quick,
                "device": ",".join(cfg.hardware) or cfg.device,
                "repeats": cfg.repeats,
                "plain": cfg.plain,
                "data": ds.name,
                "max_failures": cfg.max_failures,
                "concurrency": limit,
                "cluster_nodes": len(nodes),
            }
            name = f"{self.recipe.name} {time.strftime('%Y-%m-%d %H:%M:%S')}"
            self.parent = self.tracker.start_run(name, params, self.tags)
            return {}
        self.parent = cfg.resume
        finished, self.unfinished = earlier_trials(self.tracker, self.parent)
        self.tracker.reopen(self.parent)
        print(
            f"raylab: resuming invocation {self.parent}: {len(finished)} trial(s) finished before are not run "
            f"again, {len(self.unfinished)} go on from their last checkpoint",
            flush=True,
        )
        specs = {matrix.item_key(s, r): (s, r) for r, s in matrix.schedule(cfg, self.plain())}
        return {key: finished_outcome(*specs[key], run) for key, run in finished.items() if key in specs}

    def plain(self) -> list[TrialSpec]:
        return plain_specs(self.cfg) if self.cfg.plain else []

    def run_item(self, repeat: int, item: TrialSpec, key: str, nodes: list | None, started) -> TrialOutcome:
        """One matrix item: a plain script, or a trial (going on from its checkpoint under --resume)."""
        tags = {**self.tags, "raylab.trial_key": key}
        self.hold.now(trial=item.name)
        if item.short == "plain":
            return run_plain_item(
                self.recipe, self.cfg, self.ds, item, self.tracker, self.parent, tags, repeat, started=started
            )
        return run_trial(
            self.recipe,
            self.cfg,
            item,
            self.ds,
            self.shared,
            self.tracker,
            self.parent,
            tags,
            repeat,
            resume=self.unfinished.get(key),
            nodes=nodes,
            started=started,
            groups=self.groups,
            kept=self.kept,
        )

    def end_parent(self, outcomes: list[TrialOutcome], status: str) -> None:
        failed = [o.spec.name for o in outcomes if o.status != "FINISHED"]
        self.tracker.set_tags(
            self.parent,
            {"failed_trials": ",".join(failed) or "none", **({"resumed": "true"} if self.cfg.resume else {})},
        )
        self.tracker.end(self.parent, status)


def say_concurrency(asked: int | None, limit: int, nodes: list, one_machine: bool) -> None:
    out = console.get()
    if asked != 1 and limit == 1:
        out.line(
            f"raylab: --concurrency {asked or 'auto'}: the cluster has {len(nodes)} node(s) "
            "to run trials on, so they run one at a time (each trial holds whole nodes)."
        )
    elif limit > 1:
        out.line(f"raylab: up to {limit} trials at a time, each on whole nodes of its own ({len(nodes)} nodes)")
        if one_machine:
            out.line(
                "raylab: WARNING: every node is on this one machine (a simulated cluster): trials "
                "that run at the same time share its cores, so their timings are not comparable "
                "with trials run alone; recorded as the tag shared_machine=true."
            )


def share_data(recipe: Recipe, cfg: Settings, ds):
    """What the trials' workers read: in-memory arrays put into the object store once, or a stream opened as
    lazy Ray Data datasets (only its size is read here; --quick takes its first items)."""
    if not ds.streamed:
        return put_dataset(ds)
    from raylab.data.opened import open_stream

    streamed = open_stream(ds, (recipe.quick_train, recipe.quick_test) if cfg.quick else None, cfg.seed)
    ds.train_items, ds.test_items = streamed.info.train_items, streamed.info.test_items
    return streamed


def run_recipe(recipe: Recipe, cfg: Settings, ds: Dataset, tracker: Tracker, tags: dict) -> tuple[str, list]:
    """Runs the trial matrix under one parent run; returns (parent run id, outcomes). With cfg.resume, under that
    parent: finished trials are not run again, unfinished ones go on from their last checkpoints."""
    one_machine = cluster.driver_env()
    inv = Invocation(recipe, cfg, ds, tracker, tags)
    # Before anything is timed (the race, probes, trials): this invocation's nodes, held against other jobs
    inv.hold = hold.take(
        cfg.share_nodes, cluster.owns_cluster(), [n.id for n in matrix.cluster_nodes()], log=console.get().line
    )
    inv.tags["node_hold"] = inv.hold.how
    try:
        return _run_held(inv, recipe, cfg, ds, tracker, one_machine)
    finally:
        hold.release_at_end(inv.hold)  # after the driver's own comparison and chart where its command waits for it


def _run_held(
    inv: Invocation, recipe: Recipe, cfg: Settings, ds: Dataset, tracker: Tracker, one_machine: bool
) -> tuple[str, list]:
    inv.shared = share_data(recipe, cfg, ds)
    race.choose(recipe, cfg, ds, inv.shared)  # --compile best: each framework's execution, measured or kept
    for device in dict.fromkeys(cfg.on(s).device for s in cfg.trials):
        cluster.driver_imports([s.kind for s in cfg.trials], device)
    nodes = matrix.cluster_nodes()
    limit = matrix.concurrency_limit(cfg.concurrency, nodes)
    finished = inv.open_parent(limit, nodes)
    inv.hold.now(invocation=f"{recipe.name} ({inv.parent})")
    tracker.show_in_ui(inv.parent)
    say_concurrency(cfg.concurrency, limit, nodes, one_machine)
    trials = matrix.Matrix(nodes, limit, inv.run_item, lambda item: need(cfg, item))
    inv.groups = Groups(cfg, len(nodes) == 1, limit)
    inv.kept = Kept(cfg)
    status = "FAILED"
    try:
        trials.run(matrix.schedule(cfg, inv.plain()), finished, tracker)
        trials.record_overlaps(
            tracker,
            cfg.repeats,
            shared=one_machine and limit > 1,
            prices=cfg.prices,
            simulated=one_machine and len(nodes) > 1,
        )
        status = "FINISHED" if all(o.status == "FINISHED" for o in trials.done()) else "FAILED"
    except INTERRUPTS:
        status = "KILLED"
        raise
    finally:
        inv.groups.close_all()
        for run in list(inv.kept.runs):  # the groups have ended: their runs go where every trial finished
            inv.kept.release(run)
        if (line := inv.kept.line()) is not None:
            print(f"raylab: {line}", flush=True)
        inv.end_parent(trials.done(), status)
        remove_compile_cache(cfg)  # this node's; a cluster's other nodes keep theirs under their /tmp
    return inv.parent, trials.done()
