"""`--plain`: each framework's 1-worker job as the best plain script (raylab/frameworks/plain.py), beside the trials.

The driver writes the data and the cloudpickled model builder to a temporary directory, runs
`python -m raylab.frameworks.plain` in a subprocess with the trial's thread settings, times the whole
process (interpreter start to exit: the plain script's whole-job time) and logs it as a child
run named `FRAMEWORK:plain x1` with the same param and metric names as the trials.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from raylab.config import Settings, TrialSpec
from raylab.data import Dataset
from raylab.settings import pinning
from raylab.runtime import console
from raylab.driver.outcome import TrialOutcome, recorded
from raylab.driver.progress import held_out
from raylab.record.tracking import Tracker
from raylab.task.recipe import Recipe

PLAIN_TIMEOUT_S = 6 * 3600  # the longest a plain script may run


def plain_specs(cfg: Settings) -> list[TrialSpec]:
    """One plain script per framework among the trials (xla beside torch: its own loop), batch size and execution
    (a compiled trial's plain script compiles the same way)."""
    return list(dict.fromkeys(TrialSpec(s.framework, "plain", 1, s.batch, s.execution) for s in cfg.trials))


def plain_env(framework: str, threads: int) -> dict:
    """The environment a framework's plain script runs in: `registry.framework(name).plain_env(threads)`."""
    from raylab import registry

    return registry.framework(framework).plain_env(threads)


def driver_job() -> dict:
    """RAYLAB_RAY_JOB: this driver's Ray job (hex), whose processes a plain script counts as its cluster's upkeep."""
    import ray

    return {"RAYLAB_RAY_JOB": ray.get_runtime_context().get_job_id()} if ray.is_initialized() else {}


def this_node() -> str:
    import ray

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "this machine"


def run_plain(
    recipe: Recipe,
    cfg: Settings,
    ds: Dataset,
    framework: str,
    workdir: Path,
    trace: bool = False,
    log: Path | None = None,
    execution: str | None = None,
) -> dict:
    import cloudpickle

    data = (ds.x_train, ds.y_train, ds.x_test, ds.y_test)
    (workdir / "task.pkl").write_bytes(cloudpickle.dumps((recipe.task(ds.target_names), data)))
    spec = {
        "framework": framework,
        "task": str(workdir / "task.pkl"),
        "threads": cfg.threads,
        "epochs": cfg.epochs,
        "steps_per_epoch": cfg.steps_per_epoch,
        "batch": recipe.per_replica(1),
        "seed": cfg.seed,
        "warmup": recipe.warmup_steps,
        "window": cfg.window,
        "trace": trace,
        "execution": execution or TrialSpec(framework, "plain", 1).executes(),
    }
    (workdir / "spec.json").write_text(json.dumps(spec))
    start, pin = time.time(), pinning.for_run(cfg, cfg.threads, framework)  # --pin-cpus: pinned as a trial's process is
    proc = subprocess.Popen(
        [sys.executable, "-m", "raylab.frameworks.plain", str(workdir / "spec.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**plain_env(framework, cfg.threads), **driver_job()},
        cwd=workdir,
    )
    try:
        pin.apply([proc.pid])
        stdout, stderr = proc.communicate(timeout=PLAIN_TIMEOUT_S)
    finally:
        if proc.poll() is None:  # it timed out, or the driver is being stopped
            proc.kill()
            proc.wait(timeout=30)
        pinned = pin.end()
    wall = time.time() - start
    if log is not None:  # its own output (TF and XLA notices, warnings) goes to the trial's log
        console.get().trial_text(log, stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"the plain {framework} script exited with {proc.returncode}:\n{stderr[-3000:]}")
    return {**json.loads(stdout.strip().splitlines()[-1]), "wall_s": wall, "cpu_pinning": pinned}


def plain_params(recipe: Recipe, cfg: Settings, ds: Dataset, spec: TrialSpec, repeat: int) -> dict:
    """The same param names as a trial's (raylab/driver/trial_logs.py trial_params), for one plain process."""
    from raylab.record.params import common_params

    batch, framework = recipe.per_replica(1), spec.framework
    return {
        **common_params(recipe, cfg, ds),
        "trial": f"{framework}:plain",
        "framework": framework,
        "execution": spec.executes(),
        "compiled": spec.compiled(),
        "strategy": "plain",
        "requested_strategy": "plain",
        "workers": 1,
        "ray_workers": 0,
        "batch_per_replica": batch,
        "global_batch": batch,
        "oversubscribed": False,
        "plain": True,
        "repeat": repeat,
    }


def record_plain(tracker: Tracker, run_id: str, result: dict, target: float | None) -> dict:
    """Logs a plain script's epochs, tags and figures; returns its result as the end table reads it."""
    from raylab.record.figures import beside_figures, time_to_target

    epochs = result.pop("epochs")
    read = result.pop("beside_read", None)
    beside, beside_tags = beside_figures([read], [this_node()], whose="the script's own")
    result.update(beside)
    for e in epochs:
        tracker.log_metrics(run_id, {k: v for k, v in e.items() if k != "epoch"}, step=e["epoch"])
    result["time_to_target_s"] = time_to_target(epochs, target)
    built = {
        k: result.pop(k)
        for k in list(result)
        if k.startswith(("built_", "optimizer_")) or k in ("jit_compile", "steps_per_call")
    }
    tracker.set_tags(
        run_id,
        {
            "parameters": result.pop("parameters"),
            "actual_strategy": "plain",
            "cpu_pinning": result.pop("cpu_pinning", "off"),
            "execution": result.pop("execution"),
            "precision_applied": "fp32",
            "device_kind": "cpu",
            **built,
            **beside_tags,
        },
    )
    tracker.log_metrics(run_id, {k: v for k, v in result.items() if not k.startswith("val_")}, step=0)
    return result


def run_plain_item(
    recipe: Recipe,
    cfg: Settings,
    ds: Dataset,
    spec: TrialSpec,
    tracker: Tracker,
    parent_id: str,
    tags: dict,
    repeat: int = 1,
    started=None,
):
    """A plain script as a child run; started: told the outcome once the run exists (the driver ends it KILLED
    if the invocation is interrupted while it runs beside others)."""
    recipe, framework = recipe.with_batch(spec.batch), spec.framework
    run_id = tracker.start_run(spec.name, plain_params(recipe, cfg, ds, spec, repeat), tags, parent=parent_id)
    print(
        f"\n=== {spec.name}: the plain {framework} script (no Ray, no raylab), {cfg.epochs} epoch(s) "
        f"(MLflow run {run_id}) ===",
        flush=True,
    )
    outcome = TrialOutcome(spec, run_id, "FAILED", repeat=repeat)
    if started is not None:
        started(outcome)
    log = console.get().begin_trial(spec.name)

    def after_end():
        console.get().end_trial(log)
        tracker.log_artifact(run_id, log)

    with recorded(outcome, tracker, after_end=after_end, log=log):  # a failed plain script is recorded, the trials run
        with tempfile.TemporaryDirectory(prefix="raylab-plain-") as tmp:
            result = run_plain(recipe, cfg, ds, framework, Path(tmp), log=log, execution=spec.execution)
        outcome.result, outcome.ran = record_plain(tracker, run_id, result, recipe.target(ds)), "plain"
        val = held_out(result)
        print(
            f"[{spec.name}] {result['samples_per_sec']:,.0f} samples/s, whole job {result['wall_s']:.1f} s,{val}",
            flush=True,
        )
    return outcome
