"""`raylab compare`: the trials of one invocation, read back from MLflow, side by side."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from raylab.compare import parity, ranking, stats
from raylab.compare.chart import write_chart
from raylab.compare.runs import curves, find_parent, trial_rows
from raylab.compare.marks import beside_column, crowded, input_bound, steady_column
from raylab.record.prices import WHOLE

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
    ("val_accuracy", "test acc", "{:.4f}"),  # the held-out split: "test" in the table, the chart and the console
    ("val_loss", "test loss", "{:#.4g}"),
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


def _cell(row: dict, key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else (fmt(value) if callable(fmt) else fmt.format(value))


def _input_wait(row: dict) -> str | None:
    """The input wait column's cell: the steps' share of time waiting for input, or "in graph" where the input is
    read inside the framework's graph (tf.data in the step's tf.function) and cannot be timed apart."""
    if row.get("input_wait_share") is not None:
        return f"{row['input_wait_share']:.0%}"
    return "in graph" if row.get("input_timing") == "in the framework's graph" else None


def format_table(rows: list[dict]) -> str:
    """One line per trial; with repeats, medians and the samples/s range over them."""
    rows = [{**r, "input_wait_shown": _input_wait(r)} for r in rows]
    columns, rows, short = steady_column(_columns(rows), rows)
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
    failed = [f"  {r['trial']}: {r['error']}" for r in rows if r["status"] != "FINISHED" and r.get("error")]
    notes = _notes(rows, short + crowded_notes, repeated, concurrent)
    return "\n".join(_lines(columns, rows) + notes + (["failed:"] + failed if failed else []))


def _columns(rows: list[dict]) -> list[tuple]:
    """The table's columns for these rows: the fixed ones, then each that some row has a figure for."""
    columns = COLUMNS + (PS_COLUMNS if any(r.get("parameter_servers") for r in rows) else [])
    shown = {k for k, _, _ in columns}
    columns += [
        (k, "test " + k[4:].replace("_", " "), "{:#.4g}")
        for k in dict.fromkeys(k for r in rows for k in r)
        if k.startswith("val_") and k not in shown
    ]
    if len({r.get("batch_per_replica") for r in rows}) > 1:  # a --batch sweep: say each row's size
        columns = columns[:1] + [("batch_per_replica", "batch/replica", "{}")] + columns[1:]
    if len({r.get("hardware") for r in rows}) > 1:  # a --device sweep: what each row ran on
        columns = columns[:1] + [("hardware", "hardware", "{}")] + columns[1:]
    if any(r.get("input_wait_share") is not None for r in rows):  # the steps' wait for input, where timed
        columns = columns + [("input_wait_shown", "input wait", "{}")]
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
    return columns


def _lines(columns: list[tuple], rows: list[dict]) -> list[str]:
    """The header, a rule and one line a row, each trial's name marked as the notes explain."""
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
    return lines


def _notes(rows: list[dict], marks: list[str], repeated: bool, concurrent: bool) -> list[str]:
    """What the table's marks and columns mean, for the rows that have them."""
    notes = [
        f"* oversubscribed: more processes than CPUs, each process reserved {r['cpus_per_process']} CPU ({r['trial']})"
        for r in rows
        if r.get("oversubscribed")
    ]
    notes += [
        f"+ restarted from a checkpoint {r['restarts']:g}x ({r['trial']}): {r.get('recovery_s') or 0:.1f} s to "
        f"recover, {r.get('lost_s') or 0:.1f} s of training done again; steady figures leave both out"
        for r in rows
        if r.get("restarts")
    ]
    notes += [
        f"! input-bound: its steps waited for input {r['input_wait_share']:.0%} of their time ({r['trial']}); "
        "the figures measure the input pipeline more than the step"
        for r in rows
        if input_bound(r)
    ]
    notes += marks
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
    return notes


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
    if answer := ranking.answer(folded):  # last: which trial to pick, with its confidence
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
                "answer": ranking.answer(folded),
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
