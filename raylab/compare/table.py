"""`raylab compare`: the trials of one invocation, read back from MLflow, side by side."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from raylab.compare import parity, ranking, stats
from raylab.compare.chart import write_chart
from raylab.compare.marks import beside_column, crowded, input_bound, steady_column
from raylab.record.prices import WHOLE
from raylab.record.tracking import PARENT, ROLE
from raylab.errors import UserError

# (column, header, format) in the order the table shows them
COLUMNS = [
    ("trial", "trial", "{}"),
    ("status", "status", "{}"),
    ("execution_shown", "execution", "{}"),  # what ran; under --compile best, by how much it won its race
    ("samples_per_sec", "samples/s", stats.rate),
    ("step_time_p50_ms", "step p50 ms", "{:.2f}"),
    ("step_time_p90_ms", "step p90 ms", "{:.2f}"),
    ("startup_shown", "startup s", "{}"),  # cold bare, warm marked w (stats.shown_startup)
    ("first_step_s", "first step s", "{:.2f}"),
    ("wall_s", "wall s", "{:.1f}"),
    ("val_accuracy", "val acc", "{:.4f}"),
    ("val_loss", "val loss", "{:.4g}"),
    ("time_to_target_s", "to target s", "{:.1f}"),
    ("compile_time_warmup_s", "compile s", "{:.2f}"),
    ("compiles_after_warmup", "recompiles", "{:.0f}"),
    ("steps_per_host_sync", "steps/sync", "{:.1f}"),
]
# Shown only when some trial has them: parameter-server figures.
PS_COLUMNS = [
    ("parameter_servers", "ps", "{}"),
    ("ps_push_pull_ms", "push+pull ms", "{:.2f}"),
    ("ps_bytes_per_step", "MB/step", "{}"),
    ("staleness_mean", "stale mean", "{:.2f}"),
    ("staleness_max", "stale max", "{:.0f}"),
]
METRICS = [
    "samples_per_sec",
    "step_time_p50_ms",
    "step_time_p90_ms",
    "startup_s",
    "first_step_s",
    "wall_s",
    "val_accuracy",
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
        p, m, t = run.data.params, run.data.metrics, run.data.tags
        rows.append(
            {
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
        )
        rows[-1]["execution_shown"] = shown_execution(rows[-1])
        if rows[-1]["data_synthetic"]:  # no accuracy claims on synthetic data: random labels, chance figures
            rows[-1].update({k: None for k in rows[-1] if k.startswith("val_") or k == "time_to_target_s"})
        if rows[-1]["ps_bytes_per_step"] is not None:
            rows[-1]["ps_bytes_per_step"] = f"{rows[-1]['ps_bytes_per_step'] / 1e6:.2f}"
    return rows


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


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else (fmt(value) if callable(fmt) else fmt.format(value))


def format_table(rows: list[dict]) -> str:
    """One line per trial; with repeats, medians and the samples/s range over them."""
    columns = COLUMNS + (PS_COLUMNS if any(r.get("parameter_servers") for r in rows) else [])
    shown = {k for k, _, _ in columns}
    columns += [
        (k, k[4:].replace("_", " "), "{:.4g}")
        for k in dict.fromkeys(k for r in rows for k in r)
        if k.startswith("val_") and k not in shown
    ]
    if len({r.get("batch_per_replica") for r in rows}) > 1:  # a --batch sweep: say each row's size
        columns = columns[:1] + [("batch_per_replica", "batch/replica", "{}")] + columns[1:]
    if len({r.get("hardware") for r in rows}) > 1:  # a --device sweep: what each row ran on
        columns = columns[:1] + [("hardware", "hardware", "{}")] + columns[1:]
    if any(r.get("input_wait_share") is not None for r in rows):  # the steps' wait for input, where timed
        columns = columns + [("input_wait_share", "input wait", "{:.0%}")]
    if any(r.get("achieved_tflops") is not None for r in rows):  # work per sample x samples/s (parity.work)
        columns = columns + [("achieved_tflops", "GFLOP/s", lambda v: f"{v * 1000:,.1f}")]
    if any(r.get("utilization") is not None for r in rows):  # of `raylab peak`'s product rate (raylab/probes/peak.py)
        columns = columns + [("utilization", "of peak", "{:.1%}")]
    if any(
        r.get("vendor_utilization") is not None for r in rows
    ):  # of the vendor's dense peak (raylab/record/vendor.py)
        columns = columns + [("vendor_utilization", "of vendor peak", "{:.1%}")]
    if any(r.get("cost_usd") is not None for r in rows):  # --prices: the trial's wall time on the nodes it held
        columns = columns + [("cost_usd", "cost $", "{:.4g}")]
    if any(r.get("peak_rss_mb") is not None for r in rows):  # the largest worker process's peak RSS
        columns = columns + [("peak_rss_mb", "peak RSS MB", "{:,.0f}")]
    columns, rows, short = steady_column(columns, rows)
    columns, rows, crowded_notes = beside_column(columns, rows)
    concurrent = any(r.get("overlapped_with") not in (None, "none") for r in rows)
    if concurrent:  # trials ran at the same time: how many whole nodes each held
        columns = columns[:2] + [("nodes_held", "nodes", "{:.0f}")] + columns[2:]
    repeated = any(r.get("runs", 1) > 1 for r in rows)
    if repeated:
        columns = columns[:3] + [("sps_range", "min..max", "{}"), ("runs", "runs", "{}")] + columns[3:]
        rows = [
            {**r, "sps_range": f"{stats.rate(r['sps_min'])}..{stats.rate(r['sps_max'])}" if r.get("sps_min") else None}
            for r in rows
        ]
    rows = [{**r, "startup_shown": stats.shown_startup(r)} for r in rows]
    marked = [
        {
            **r,
            "trial": r["trial"]
            + (" *" if r.get("oversubscribed") else "")
            + (" +" if r.get("restarts") else "")
            + (" !" if input_bound(r) else "")
            + (" ^" if crowded(r) else ""),
        }
        for r in rows
    ]
    cells = [[h for _, h, _ in columns]] + [[_cell(r, k, f) for k, _, f in columns] for r in marked]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))) for line in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    failed = [f"  {r['trial']}: {r['error']}" for r in rows if r["status"] != "FINISHED" and r.get("error")]
    notes = [
        f"* oversubscribed: more processes than CPUs, each process reserved {r['cpus_per_process']} CPU ({r['trial']})"
        for r in rows
        if r.get("oversubscribed")
    ]
    notes += [
        f"+ restarted from a checkpoint {r['restarts']:g}x ({r['trial']}): {r.get('recovery_s') or 0:.1f} s to recover, "
        f"{r.get('lost_s') or 0:.1f} s of training done again; steady figures leave both out"
        for r in rows
        if r.get("restarts")
    ]
    notes += [
        f"! input-bound: its steps waited for input {r['input_wait_share']:.0%} of their time ({r['trial']}); "
        "the figures measure the input pipeline more than the step"
        for r in rows
        if input_bound(r)
    ]
    notes += short + crowded_notes
    if repeated:
        notes.append("medians over repeats; min..max = the samples/s range")
    if any("warm" in (r.get("start") or "") for r in rows):
        notes.append(
            "startup s: new worker processes (cold) / processes of a warm worker group (w), medians of each; "
            "where a trial ran both ways, wall s is its cold runs'"
        )
    if concurrent:
        notes.append(
            "trials ran at the same time, each on whole nodes of its own (nodes = nodes it held); "
            "who overlapped whom is under 'ran at the same time'"
        )
    return "\n".join(lines + notes + (["failed:"] + failed if failed else []))


def format_report(rows: list[dict]) -> str:
    """The table, then the protocol's sections: significance, scaling, overhead, parity; last, the answer (the
    fastest and the cheapest trial to the recipe's target)."""
    folded = stats.fold(rows)
    parts = [format_table(folded)]
    sections = [
        ("differences", stats.significance(folded)),
        ("scaling", stats.scaling(folded)),
        ("overhead vs plain scripts", stats.overhead(folded)),
        (
            "startup before the first step, s (process = until the worker process starts; workers = its Ray "
            "Train and backend set-up)",
            stats.startup(folded),
        ),
        ("ran at the same time (each on whole nodes of its own)", overlapping(rows)),
        ("cost (--prices): how each trial was billed", cost_split(rows)),
    ]
    parts += [f"\n{title}:\n" + "\n".join(f"  {line}" for line in lines) for title, lines in sections if lines]
    lines, mismatches = parity.parity(rows)
    verdict = "fair" if not mismatches else f"UNFAIR ({', '.join(mismatches)} differ)"
    parts.append(f"\nparity: {verdict}\n" + "\n".join(lines))
    if fastest := ranking.by_speed(folded, mismatches):  # what the verdict supports, by samples/s
        parts.append(
            f"\nthe answer, by samples/s (timed {parity.STEADY_FLOOR_S:g} s or more, alone):\n"
            + "\n".join(f"  {line}" for line in fastest)
        )
    if answer := stats.answer(folded):  # last: which trial to pick, with its confidence
        parts.append("\nthe answer, to the recipe's target:\n" + "\n".join(f"  {line}" for line in answer))
    return "\n".join(parts)


def overlapping(rows: list[dict]) -> list[str]:
    """One line per trial that overlapped others: the nodes it held and the trials it ran beside."""
    lines = [
        f"{r['trial']}: nodes {r.get('node_ids_held') or '-'}; beside {r['overlapped_with'].replace(',', ', ')}"
        for r in rows
        if r.get("overlapped_with") not in (None, "none")
    ]
    if any(r.get("shared_machine") for r in rows):
        lines.append(
            "! the nodes are one machine (a simulated cluster): trials side by side shared its cores, so "
            "their timings are not comparable with trials run alone"
        )
    return lines


def cost_split(rows: list[dict]) -> list[str]:
    """How the trials' costs were split, each way once with its trials (raylab/record/prices.py)."""
    ways: dict[str, list[str]] = {}
    for r in rows:
        if r.get("cost_usd") is not None:
            ways.setdefault(r.get("cost_split") or WHOLE, []).append(r["trial"])
    return [f"{way}: {', '.join(dict.fromkeys(trials))}" for way, trials in ways.items()]


def format_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["trial"])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


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


def compare(tracker, experiment: str, run_id: str | None, fmt: str, chart: Path | None, user: str | None = None) -> str:
    from raylab.record.tracking import USER

    exp, parent = find_parent(tracker.client, experiment, run_id, user)
    whose = parent.data.tags.get(USER) or "unknown"
    rows = trial_rows(tracker.client, exp.experiment_id, parent.info.run_id)
    if fmt == "json":
        _, mismatches = parity.parity(rows)
        folded = stats.fold(rows)
        return json.dumps(
            {
                "experiment": experiment,
                "parent_run_id": parent.info.run_id,
                "user": whose,
                "trials": rows,
                "folded": folded,
                "unfair": mismatches,
                "verdict": "fair" if not mismatches else "unfair",
                "answer": stats.answer(folded),
                "ranking": ranking.by_speed(folded, mismatches),
            },
            indent=2,
        )
    if fmt == "csv":
        return format_csv(rows)
    which = (
        ""
        if run_id
        else (
            f", {whose}'s latest invocation"
            if user
            else f", the latest invocation of yours ({whose}; --user or --run for another)"
        )
    )
    text = f"experiment '{experiment}', run {parent.info.run_name} ({parent.info.run_id}){which}\n" + format_report(
        rows
    )
    if chart is not None and any(r.get("samples_per_sec") is not None for r in rows):
        write_chart(stats.fold(rows), chart, f"{experiment}: {parent.info.run_name}", curves(tracker.client, rows))
        try:
            tracker.log_artifact(parent.info.run_id, chart)
            text += f"\nchart: {chart} (also an artifact of the parent run)"
        except Exception as e:  # noqa: BLE001 - the chart is on disk; where the store cannot take it, say why
            # e.g. a server's sqlite file opened directly: its runs' artifacts are mlflow-artifacts:/ URIs, which
            # only the server can write
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            text += (
                f"\nchart: {chart} (not logged as an artifact of the parent run: {first}; point "
                "--tracking-uri at the tracking server to log it there)"
            )
    return text
