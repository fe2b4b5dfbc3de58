"""One trial as an MLflow child run: open its run (or reopen it, --resume), watch it, fit(), record what ran.

A trial's kind, short name and trial name: docs/architecture.md, "Names".

`trial_record` (raylab/record/figures.py) turns what the workers reported into what is recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import ray

from raylab import failure
from raylab.config import Settings, TrialSpec
from raylab.data import Dataset
from raylab.settings import pinning, resolve
from raylab.runtime import console
from raylab.probes import batchsize, floor, peak
from raylab.probes.utilization import utilization, worker_nodes
from raylab.driver.outcome import INTERRUPTED, TrialOutcome, recorded
from raylab.driver.progress import Progress
from raylab.driver import trial_logs
from raylab.record.figures import agreement, beside_figures, failures_tag, peak_memory, start_env_tag, trial_record
from raylab.record.sink import TrialSink, abort_line_of, restart_figures, sink_name
from raylab.record.tracking import Tracker
from raylab.driver.trainer import build_trainer, train_run_name
from raylab.task.recipe import Recipe


FIRST = "the first trial of a new warm group"  # a cold trial's reason when it starts a group


@dataclass
class Trial:
    """One trial of the matrix: its run, its sink, its progress thread and its outcome."""

    recipe: Recipe  # with the trial's batch applied
    cfg: Settings
    spec: TrialSpec
    ds: Dataset
    shared: dict  # the data's object shared (raylab/data/__init__.py put_dataset)
    tracker: Tracker
    repeat: int = 1  # which of --repeats
    groups: object = None  # the invocation's warm worker groups (raylab/driver/groups.py); None: cold
    kept: object = None  # the invocation's checkpoints (raylab/driver/retention.py Kept); None: left as they are
    run_id: str = ""  # its MLflow run, once open
    logged: list = field(default_factory=list)  # epochs an interrupted run already logged (--resume)
    train_run: str | None = None  # the Ray Train run it went on in (--resume of a trial that ran in a warm group)
    group: object = None  # the warm group it runs in (None: processes of its own)
    start: dict = field(default_factory=lambda: {"start": "cold", "group_index": 0})
    log: object = None  # its log file (raylab/runtime/console.py)
    sink: object = None  # its TrialSink actor
    progress: Progress | None = None
    outcome: TrialOutcome | None = None

    def open(self, parent_id: str, tags: dict, resume: tuple[str, list, str | None] | None) -> TrialOutcome:
        """Starts its child run, or reopens an interrupted one (resume = (run id, epochs it logged, its Ray Train
        run)); finds the warm group it joins, or starts one (raylab/driver/groups.py)."""
        spec, cfg = self.spec, self.cfg
        cold_why = self.place(resume is not None)
        if resume:
            self.run_id, self.logged, self.train_run = resume
            self.tracker.reopen(self.run_id)
            self.tracker.set_tags(self.run_id, {"resumed_start": "cold"})
        else:
            params = {**trial_logs.trial_params(self.recipe, cfg, spec, self.ds), "repeat": self.repeat, **self.start}
            self.run_id = self.tracker.start_run(spec.name, params, {**tags, **cold_why}, parent=parent_id)
        if self.group is None and cold_why.get("cold_reason") == FIRST:  # the first of a new warm group
            self.group = self.groups.begin(spec, f"raylab-group-{self.run_id}", self.group_trainer, cfg)
        if self.group is not None:
            self.tracker.set_tags(self.run_id, {"train_run": self.group.name, "group_setup": self.group.setup})
        again = f", repeat {self.repeat}/{cfg.repeats}" if cfg.repeats > 1 else ""
        went_on = f", resumed after epoch {len(self.logged)}" if resume else ""
        warm = f", warm: trial {self.start['group_index'] + 1} of its group" if self.start["start"] == "warm" else ""
        print(
            f"\n=== {spec.name}: {self.recipe.name}, {cfg.length()}, {cfg.threads} thread(s)/replica{again} "
            f"(MLflow run {self.run_id}{went_on}{warm}) ===",
            flush=True,
        )
        self.log = console.get().begin_trial(spec.name)
        # Named: tools and tests can find a trial. It holds the epochs already logged, so they are not sent twice.
        self.sink = TrialSink.options(name=sink_name(self.run_id)).remote(self.logged)
        if cfg.memory_cap_mb:  # a worker its allocator aborts names its cause (raylab/driver/policy.py Policy)
            console.get().watch(self.log, failure.allocator_abort, self.sink.aborted.remote)
        self.outcome = TrialOutcome(spec, self.run_id, "FAILED", repeat=self.repeat, start=self.start)
        return self.outcome

    def place(self, resumed: bool) -> dict:
        """Which warm group it runs in (self.group, self.start); {"cold_reason": why} where it is cold (FIRST: it
        starts a new group), {} where it joins a group."""
        from raylab.driver.groups import Groups

        if self.groups is None:
            return {"cold_reason": "its processes are its own"}
        if resumed:
            return {"cold_reason": "--resume goes on in the trial's own Ray Train run"}
        self.group, why = self.groups.find(self.spec, self.cfg)
        if self.group is not None:
            self.start = {"start": "warm", "group_index": self.group.trials}
        if why:
            self.groups.make_room(need=Groups.need(self.cfg, self.spec))
        return {} if self.group is not None else {"cold_reason": why or self.groups.why_new or FIRST}

    def group_trainer(self, queue, setup):
        from raylab.driver.trainer import build_group_trainer

        return build_group_trainer(self.cfg, setup, queue, f"raylab-group-{self.run_id}", self.groups.share())

    def run(self, nodes: list | None = None) -> TrialOutcome:
        """fit() and record; whatever happens, its run ends (raylab/driver/outcome.py), then its sink goes."""
        # The sink goes after the run has ended: a dead cluster must not leave the run RUNNING.
        with recorded(
            self.outcome, self.tracker, before_end=self.last_progress, after_end=self.after_end, log=self.log
        ):
            final, wall = self.fit(nodes)
            self.record(final, wall)
        return self.outcome

    def fit(self, nodes: list | None) -> tuple[dict | None, float]:
        """Runs the trainer, watched by a progress thread; (rank 0's final report, wall seconds)."""
        start = time.time()
        self.progress = Progress(
            self.sink,
            self.tracker,
            self.run_id,
            self.spec.name,
            synthetic=self.ds.synthetic,
            log=self.log,
            pinning=pinning.for_run(self.cfg, self.spec.layout(self.cfg).cpus_per_worker, self.spec.framework),
        )
        self.progress.logged = len(self.logged)
        task = self.recipe.task(self.ds.target_names)
        self.progress.start()
        try:
            if self.group is not None:
                result = self.in_group(task, start)
            else:
                result = build_trainer(
                    self.recipe,
                    self.cfg,
                    self.spec,
                    task,
                    self.shared,
                    self.sink,
                    start,
                    self.run_id,
                    nodes,
                    self.train_run,
                ).fit()
        except Exception as e:
            code = failure.code_failures(e)
            aborted = abort_line_of(self.sink) if self.cfg.memory_cap_mb and failure.lost_processes(e) else None
            if aborted:  # its allocator aborted a worker under the cap: out of memory
                replicas = self.spec.layout(self.cfg).replicas
                code = [failure.abort_failure(aborted, self.recipe.per_replica(replicas), self.cfg.memory_cap_mb)]
            elif not code or failure.lost_processes(e):  # a lost process: Ray Train's budget decided
                raise
            self.tracker.set_tags(self.run_id, {"failure_kind": code[0].kind, "failure_where": code[0].where})
            raise failure.TrialCodeError(code[0]) from e
        if result is not None and result.checkpoint is not None:
            self.tracker.set_tags(self.run_id, {"checkpoint_path": result.checkpoint.path})
        wall = time.time() - start
        self.outcome.epochs, final = self.progress.finish()
        return final, wall

    def in_group(self, task, start: float):
        """Hands the trial to its warm group and waits for every rank to finish it; None (its checkpoint is in the
        group's Ray Train run, `train_run`)."""
        from raylab.driver.trainer import worker_config

        wcfg = worker_config(self.recipe, self.cfg, self.spec, task, self.shared, self.sink, start, self.run_id)
        # Its sink's new process starts within the trial's start-up, not beside its steady steps: a warm group's steps
        # begin in under a second, a Ray worker's start takes a second or more of a core (a cold trial's own start is
        # longer than its sink's)
        ray.get(self.sink.pids.remote(), timeout=60)
        self.group.wait(self.group.submit(self.spec.kind, wcfg))
        return None

    def record(self, final: dict | None, wall: float) -> None:
        spec, run_id = self.spec, self.run_id
        floor_s = floor.floor_for(spec.framework, floor.load())  # `raylab floor` measured it here
        trial_logs.data_stats(self.tracker, run_id, final.pop("ray_data_stats", None) if final else None)
        trial_logs.profile(self.tracker, run_id, self.sink, self.cfg.profile, spec)
        rec = trial_record(
            final,
            self.outcome.epochs,
            wall,
            self.recipe.target(self.ds),
            floor_s,
            spec.short,
            spec.strategy.replicas_found,
        )
        memory, memory_tags = self.peak_memory()
        agreed = self.replica_agreement()  # worker_node_ids: where its workers ran
        types, here = worker_nodes(agreed)  # a peak measured on this host is its trials' only where they ran here
        resolved = resolve.trial(self.cfg, spec)
        used, used_tags = utilization(
            spec.framework,
            resolved.runs_on,
            rec.tags,
            resolved.threads,
            int(rec.tags.get("replicas_in_sync") or spec.workers),
            rec.result.get("achieved_tflops"),
            peak.load() if here else {},
            [resolved.accelerator_type, *types, self.cfg.tpu_type],
        )
        # what ran beside its workers over their timed window, per node (raylab/loop/beside.py)
        beside, beside_tags = beside_figures(*ray.get([self.sink.besides.remote(), self.sink.worker_nodes.remote()]))
        memory.update({**used, **beside})
        memory_tags.update({**used_tags, **beside_tags})
        self.outcome.result, self.outcome.ran = {**rec.result, **memory}, rec.ran
        self.tracker.log_metrics(run_id, {**rec.metrics, **memory}, step=0)
        fallen = resolved.precision_fallback_reason
        self.tracker.set_tags(
            run_id, {**rec.tags, **agreed, **memory_tags, **({"precision_fallback_reason": fallen} if fallen else {})}
        )
        self.tracker.log_params(run_id, rec.params)
        if rec.ran != spec.short:
            self.tracker.rename(run_id, self.outcome.ran_name)
            reason = final["actual"].get("fallback_reason", "")
            console.get().line(f"[{spec.name}] ran as {self.outcome.ran_name}: {reason}")
        if rec.result.get("compiles_after_warmup"):
            self.tracker.set_tags(run_id, {"recompiled_after_warmup": "true"})
            console.get().line(
                f"[{spec.name}] WARNING: {rec.result['compiles_after_warmup']} compilation(s) "
                "after warm-up: a training step's graph changed (shapes, control flow); see the "
                "compile_* metrics."
            )

    def replica_agreement(self) -> dict:
        per_rank = ray.get(self.sink.replica_checksums.remote(), timeout=60)
        nodes = ray.get(self.sink.worker_nodes.remote(), timeout=60)
        return agreement(per_rank, nodes)

    def peak_memory(self) -> tuple[dict, dict]:
        """peak_rss_mb: the largest peak RSS over the training worker processes (metric); each rank's in the tag
        peak_rss_mb_by_rank."""
        return peak_memory(ray.get(self.sink.peak_rss.remote(), timeout=60))

    def last_progress(self) -> None:
        """Before the run ends: the last epochs, restarts, the workers' processes (`worker_pids`, each that ran the
        trial, in the order they started it) and start environment, whether the trial finished or ran out of
        restarts."""
        if self.progress is not None and self.progress.is_alive():
            self.progress.finish()
        pinned = self.progress.pinning.end() if self.progress is not None else "off"  # all back on their CPUs
        try:
            history, envs, failures, pids = ray.get(
                [
                    self.sink.history.remote(),
                    self.sink.started_envs.remote(),
                    self.sink.failures.remote(),
                    self.sink.pids.remote(),
                ],
                timeout=30,
            )
        except Exception:  # noqa: BLE001 - a dead cluster: nothing more to learn
            return
        self.tracker.set_tags(
            self.run_id,
            {
                "worker_pids": ",".join(str(pid) for pid, _ in pids),  # restarted ones too
                "worker_start_env": start_env_tag(envs),
                "cpu_pinning": pinned,
                **({"failures": failures_tag(failures)} if failures else {}),
            },
        )
        figures = restart_figures(history, failures)
        self.outcome.result.update(figures)
        if figures["restarts"] or self.outcome.status == "FAILED":  # a failed trial says it was not restarted
            self.tracker.log_metrics(self.run_id, figures, step=0)
        if figures["restarts"]:
            self.tracker.set_tags(self.run_id, {"restarted": figures["restarts"]})
            console.get().line(
                f"[{self.spec.name}] restarted {figures['restarts']}x from its last checkpoint: "
                f"{figures['recovery_s']:.1f}s to recover, {figures['lost_s']:.1f}s of training "
                f"done again; why: {failures_tag(failures)}"
            )

    def after_end(self) -> None:
        if self.group is not None and self.outcome.status != "FINISHED":  # nothing of it reaches the next trial
            self.groups.end(self.group)
        if self.kept is not None:  # a cold trial's checkpoints are its own; a group's serve its next trial
            run = self.group.name if self.group is not None else self.train_run or train_run_name(self.run_id)
            self.kept.ended(run, self.outcome.status, still_used=self.group is not None and self.group.alive)
        console.get().end_trial(self.log)
        self.tracker.log_artifact(self.run_id, self.log)
        ray.kill(self.sink)


def run_trial(
    recipe: Recipe,
    cfg: Settings,
    spec: TrialSpec,
    ds: Dataset,
    shared: dict,
    tracker: Tracker,
    parent_id: str,
    tags: dict,
    repeat: int = 1,
    resume: tuple[str, list, str | None] | None = None,
    nodes: list | None = None,
    started: Callable[[TrialOutcome], None] | None = None,
    groups=None,
    kept=None,
) -> TrialOutcome:
    """One trial as a child run. resume=(run id, epochs it logged, its Ray Train run): an interrupted trial's run
    goes on (--resume), from its last checkpoint; its logged epochs are not logged again. nodes: the nodes it holds
    while other trials run (its workers are placed there); started: told the outcome once the run exists; groups:
    the invocation's warm worker groups (raylab/driver/groups.py), None: the trial has processes of its own; kept: the
    invocation's checkpoints (raylab/driver/retention.py), told when the trial ends."""
    searched, error = {}, None
    cfg = cfg.on(spec)  # its own device and accelerator type where --device sweeps them
    if cfg.batch_max and resume is None:
        try:
            spec, searched = batchsize.for_trial(recipe, cfg, spec, ds, shared, nodes, groups)
        except Exception as e:  # noqa: BLE001 - the trial's run ends FAILED with it; the next trial runs
            if INTERRUPTED.is_set():
                raise
            error = e
    trial = Trial(recipe.with_batch(spec.batch), cfg, spec, ds, shared, tracker, repeat, groups, kept=kept)
    outcome = trial.open(parent_id, {**tags, **searched}, resume)
    if started is not None:
        started(outcome)
    if error is not None:
        with recorded(outcome, tracker, after_end=trial.after_end, log=trial.log):
            raise error
        return outcome
    return trial.run(nodes)
