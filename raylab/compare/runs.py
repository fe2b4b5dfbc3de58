"""An invocation's runs read back from MLflow: its parent run, and each trial's child run as one row of the names
the table, the parity report and the statistics read."""

from __future__ import annotations

from raylab.compare.stats import HEADLINE
from raylab.errors import UserError
from raylab.record.tracking import PARENT, ROLE

METRICS = [
    *HEADLINE,
    "val_loss",
    "train_loss",
    "train_accuracy",
    "compile_count_warmup",
    "compile_time_warmup_s",
    "compiles_after_warmup",
    "ps_push_pull_ms",
    "ps_bytes_per_step",
    "staleness_mean",
    "staleness_max",
    "time_to_target_s",
    "startup_process_s",
    "startup_workers_s",
    "startup_imports_s",
    "startup_setup_s",
    "startup_data_s",
    "startup_model_s",
    "startup_other_s",
    "host_syncs",
    "steps_per_host_sync",
    "restarts",
    "recovery_s",
    "lost_s",
    "nodes_held",
    "startup_floor_s",
    "input_wait_s",
    "input_wait_share",
    "peak_rss_mb",
    "loss_scale",
    "skipped_steps",
    "flops_per_sample",
    "achieved_tflops",
    "peak_tflops",
    "utilization",
    "vendor_utilization",
    "vendor_peak_tflops",
    "cost_usd",
    "cost_to_target_usd",
    "price_usd_per_hour",
    "steady_s",
    "beside_cores",
    "steal_cores",
    "ray_daemon_cores",
    "beside_s",
    "steps_trained",
]
# Settings the parity report checks, read from each trial's params (p) and tags (t).
PARITY_PARAMS = [
    "optimizer",
    "lr",
    "data",
    "train_samples",
    "seed",
    "epochs",
    "steps_per_epoch",
    "seconds",
    "target_accuracy",
    "repeat",
    "batch_per_replica",
    "shuffle",
]
BUILT_TAGS = ["built_optimizer", "built_lr_schedule", "built_loss", "built_metrics", "built_preprocess"]


def find_parent(client, experiment: str, run_id: str | None = None, user: str | None = None):
    """The parent run asked for, or the latest invocation of `user` (default: the caller, raylab.record.tracking.user)
    in the experiment: a tracking server holds every user's runs, and the latest of them may be another's. An
    invocation recorded before raylab tagged its user counts as anyone's."""
    from raylab.record import tracking

    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise UserError(
            f"no MLflow experiment named '{experiment}' at this tracking URI; check --experiment and --tracking-uri."
        )
    if run_id:
        run = client.get_run(run_id)
        if run.info.experiment_id != exp.experiment_id:
            raise UserError(f"run {run_id} is not in experiment '{experiment}'.")
        return exp, run
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{ROLE}` = 'parent'",
        order_by=["attributes.start_time DESC"],
        max_results=500,
    )
    if not runs:
        raise UserError(f"experiment '{experiment}' has no raylab runs yet; run a recipe first.")
    who = user or tracking.user()
    mine = [r for r in runs if r.data.tags.get(tracking.USER) in (who, None, "unknown")]
    if not mine:
        latest = runs[0]
        raise UserError(
            f"experiment '{experiment}' has no invocation of user '{who}'; its latest is "
            f"{latest.data.tags.get(tracking.USER)}'s ({latest.info.run_name}, {latest.info.run_id}): pass "
            f"--user {latest.data.tags.get(tracking.USER)} or --run {latest.info.run_id}."
        )
    return exp, mine[0]


def trial_rows(client, experiment_id: str, parent_id: str) -> list[dict]:
    children = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{PARENT}` = '{parent_id}'",
        order_by=["attributes.start_time ASC"],
        max_results=1000,
    )
    rows = []
    # --batch sweeps: one group per batch size, in the order run (a stable sort keeps the trial order inside)
    children = sorted(children, key=lambda run: int(run.data.params.get("batch_per_replica", 0) or 0))
    for run in children:
        rows.append(_row(run))
        rows[-1]["execution_shown"] = shown_execution(rows[-1])
        if rows[-1]["data_synthetic"]:  # no accuracy claims on synthetic data: random labels, chance figures
            rows[-1].update({k: None for k in rows[-1] if k.startswith("val_") or k == "time_to_target_s"})
        if rows[-1]["ps_bytes_per_step"] is not None:
            rows[-1]["ps_bytes_per_step"] = f"{rows[-1]['ps_bytes_per_step'] / 1e6:.2f}"
    return rows


def _row(run) -> dict:
    """One child run as a row: its params (p), metrics (m) and tags (t) under the table's names."""
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    return {
        "trial": run.info.run_name,
        "framework": p.get("framework"),
        "strategy": p.get("strategy") or p.get("requested_strategy"),
        "requested_strategy": p.get("requested_strategy") or p.get("strategy"),
        "workers": int(p.get("workers", 0)),
        "status": run.info.status,
        "run_id": run.info.run_id,
        **{k: m.get(k) for k in METRICS},
        "threads": p.get("threads"),
        "global_batch": p.get("global_batch"),
        "strategy_class": t.get("strategy_class"),
        "device_kind": t.get("device_kind"),
        "error": t.get("error_summary"),
        "failures": t.get("failures"),
        "actual_strategy": t.get("actual_strategy"),
        "parameter_servers": p.get("parameter_servers"),
        "oversubscribed": p.get("oversubscribed") == "True",
        "cpus_per_process": p.get("cpus_per_process"),
        "data_synthetic": p.get("data_synthetic") == "True",
        "parameters": t.get("parameters"),
        "precision_applied": t.get("precision_applied"),
        "float32_matmul": t.get("float32_matmul"),
        # how its steps executed (the worker's tag; the param, what was asked, for a run that never started)
        "execution": t.get("execution") or p.get("execution"),
        "compiled": p.get("compiled"),
        "execution_choice": p.get("execution_choice"),
        "execution_candidates": p.get("execution_candidates"),
        "execution_margin": p.get("execution_margin"),
        "optimizer_impl": t.get("optimizer_impl"),
        "model_settings": t.get("model_settings"),
        "activations": t.get("activations"),
        "input_timing": t.get("input_timing"),
        "flops_count": t.get("flops_count"),
        "cost_split": t.get("cost_split"),
        "start": p.get("start"),
        "group_index": p.get("group_index"),
        "overlapped_with": t.get("overlapped_with"),
        "node_ids_held": t.get("node_ids_held"),
        "beside": t.get("beside"),
        "node_hold": t.get("node_hold"),
        "shared_machine": t.get("shared_machine") == "true",
        "hardware": hardware_of(p, t),
        **{k: p.get(k) for k in PARITY_PARAMS},
        **{k: t.get(k) for k in BUILT_TAGS},
        # the recipe's other metrics on the test split (val_mask_iou, val_mean_absolute_error, ...)
        **{k: v for k, v in m.items() if k.startswith("val_") and k not in METRICS},
    }


def hardware_of(params: dict, tags: dict) -> str | None:
    """What a trial ran on: its device ("cpu", "gpu"; a TPU kind's "tpu" from its worker), with the accelerator
    types of the nodes it held where it asked for one (--device gpu:H100, --accelerator-type): "cpu:T4"."""
    device = "tpu" if (tags.get("device_kind") or "").endswith("tpu") else params.get("device")
    if device is None or not params.get("accelerator_type"):
        return device
    types = sorted({t for t in (tags.get("node_types") or "").split(",") if t and t != "cpu"})
    return f"{device}:{'+'.join(types) or params['accelerator_type'] + '?'}"


def shown_execution(row: dict) -> str | None:
    """The execution as the table shows it: 'eager' where --compile forced it, 'eager best 1.33x' where it won
    --compile best's race by that much a step, 'jit best' where it was its framework's only candidate."""
    if row.get("execution_choice") != "best" or row.get("execution") is None:
        return row.get("execution")
    margin = row.get("execution_margin")
    return f"{row['execution']} best" + (f" {float(margin):.2f}x" if margin else "")


def curves(client, rows: list[dict]) -> list[dict]:
    """Per trial run: its test accuracy (else test loss) after each epoch against the wall time since the
    trial started (start-up included), from the runs' metric histories."""
    out = []
    for r in rows:
        if r.get("data_synthetic") or r.get("status") != "FINISHED":
            continue
        wall = {m.step: m.value for m in client.get_metric_history(r["run_id"], "elapsed_s")}
        key = "val_accuracy" if r.get("val_accuracy") is not None else "val_loss"
        points = sorted((wall[m.step], m.value) for m in client.get_metric_history(r["run_id"], key) if m.step in wall)
        if points:
            out.append({"trial": r["trial"], "framework": r["framework"], "metric": key, "points": points})
    return out
