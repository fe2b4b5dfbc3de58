"""The comparison's chart: a PNG of the trials side by side (throughput, step time, accuracy; the work done, time and
cost to the target where recorded; accuracy against wall time), written by `raylab compare` and at the end of every
invocation, and logged with the parent run."""

from __future__ import annotations

from pathlib import Path

from raylab.registry import frameworks

# The second row, where a trial recorded it: (key, axis label, scale to the label's unit)
MORE = [
    ("achieved_tflops", "work done, GFLOP/s (forward and gradients, each framework's count)", 1000.0),
    ("time_to_target_s", "time to the recipe's target, s (start-up included)", 1.0),
    ("cost_to_target_usd", "cost to the recipe's target, US$ (--prices)", 1.0),
]


def chart_data(rows: list[dict], lines: list[dict] | None = None) -> dict:
    """What the chart draws, as data (a test reads this, not pixels): the bars' trials top to bottom (each with its
    marks: ~ too short to time, ^ measured beside other work), one colour a framework in every panel, the legend in
    the bars' order of frameworks, every panel's bars from zero, and the curves in their framework's colour."""
    from raylab.compare.marks import crowded
    from raylab.compare.parity import too_short

    done = [r for r in rows if r.get("samples_per_sec") is not None]
    short = dict(too_short(done))
    palette = {fw.name: fw.color for fw in frameworks()}
    titles = {fw.name: fw.title for fw in frameworks()}
    frameworks_shown = list(dict.fromkeys(r["framework"] for r in done))
    return {
        "names": [r["trial"] + (" ~" if r["trial"] in short else "") + (" ^" if crowded(r) else "") for r in done],
        "colors": [palette.get(r["framework"], "tab:gray") for r in done],
        "panels": _panels(done),
        "more": [
            {"key": key, "label": label, "values": [(r.get(key) or 0.0) * scale for r in done], "xlim": (0.0, None)}
            for key, label, scale in MORE
            if any(r.get(key) is not None for r in done)
        ],
        "legend": [(titles.get(fw, fw), palette.get(fw, "tab:gray")) for fw in frameworks_shown],
        "curves": _curves(lines or [], palette),
        "notes": (["~ too short to time (under 5 s of steady steps)"] if short else [])
        + (["^ measured beside other work"] if any(map(crowded, done)) else []),
    }


def _panels(done: list[dict]) -> list[dict]:
    """The three panels every chart has: samples/s, step time, and test accuracy (or test loss)."""
    sps = [r["samples_per_sec"] for r in done]
    accuracy = any(r.get("val_accuracy") is not None for r in done)
    timed = any(r.get("seconds") for r in done)  # each trial ended at its own step: accuracy not compared
    return [
        {
            "key": "samples_per_sec",
            "values": sps,
            "xlim": (0.0, None),
            "err": [
                [v - (r.get("sps_min") or v) for v, r in zip(sps, done)],
                [(r.get("sps_max") or v) - v for v, r in zip(sps, done)],
            ],
            "label": "steady-state samples/s (global; median, whisker min..max over repeats)",
        },
        {
            "key": "step_time_p50_ms",
            "values": [r["step_time_p50_ms"] for r in done],
            "xlim": (0.0, None),
            "err": [[0.0] * len(done), [r["step_time_p90_ms"] - r["step_time_p50_ms"] for r in done]],
            "label": "step time ms (bar p50, whisker p90)",
        },
        {
            "key": "val_accuracy",
            "values": [r["val_accuracy"] or 0.0 for r in done],
            "xlim": (0.0, 1.0),
            "label": "test accuracy" + (" (each after its own steps: --seconds)" if timed else ""),
        }
        if accuracy
        else {
            "key": "val_loss",
            "values": [r.get("val_loss") or 0.0 for r in done],
            "xlim": (0.0, None),
            "label": "test loss",
        },  # a task without accuracy (regression, segmentation)
    ]


def _curves(lines: list[dict], palette: dict) -> list[dict]:
    """Each trial's curve in its framework's colour; trials of one framework told apart by their line style."""
    styles = ["-", "--", ":", "-."]
    trials = list(dict.fromkeys(c["trial"] for c in lines))
    return [
        {
            "trial": c["trial"],
            "color": palette.get(c.get("framework"), "tab:gray"),
            "metric": c["metric"],
            "style": styles[
                [t for t in trials if t.split(":")[0] == c["trial"].split(":")[0]].index(c["trial"]) % len(styles)
            ],
            "points": c["points"],
        }
        for c in lines
    ]


def write_chart(rows: list[dict], path: Path, title: str, lines: list[dict] | None = None) -> Path:
    """Throughput (with the p50..p90 step-time spread) and accuracy per trial; where recorded, the work done
    (GFLOP/s, with the share of the peak), the time and the cost to the target; and with `lines` (curves()) test
    accuracy against wall time, a curve per trial run, as a PNG (what it draws: chart_data)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    data = chart_data(rows, lines)
    names, colors = data["names"], data["colors"]
    bars_h = 0.6 * max(len(names), 3) + 1.5
    heights = [bars_h] + ([bars_h] if data["more"] else []) + ([4.5] if lines else [])
    fig = plt.figure(figsize=(15, sum(heights)))
    grid = fig.add_gridspec(len(heights), 3, height_ratios=heights)
    axes = [fig.add_subplot(grid[0, 0])]
    axes += [fig.add_subplot(grid[0, i], sharey=axes[0]) for i in (1, 2)]
    for ax in axes[1:]:
        ax.tick_params(labelleft=False)
    for ax, panel in zip(axes, data["panels"]):
        err = panel.get("err")
        ax.barh(names, panel["values"], xerr=err if err and any(map(any, err)) else None, color=colors, capsize=3)
        ax.set_xlim(*panel["xlim"])
        ax.set_xlabel(panel["label"])
    if data["more"]:
        draw_more(
            [fig.add_subplot(grid[1, i], sharey=axes[0]) for i in range(len(data["more"]))],
            data["more"],
            rows,
            names,
            colors,
        )
    if lines:
        draw_curves(fig.add_subplot(grid[len(heights) - 1, :]), data["curves"])
    axes[0].invert_yaxis()
    axes[2].legend(handles=[Patch(color=color, label=label) for label, color in data["legend"]], loc="lower right")
    fig.suptitle(title + ("\n" + "; ".join(data["notes"]) if data["notes"] else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_more(axes, more: list[dict], rows: list[dict], names: list[str], colors: list) -> None:
    """The second row: a panel per MORE figure some trial recorded; GFLOP/s with each trial's share of the peak."""
    done = [r for r in rows if r.get("samples_per_sec") is not None]
    for i, (ax, panel) in enumerate(zip(axes, more)):
        values = panel["values"]
        ax.barh(names, values, color=colors)
        ax.set_xlim(0.0, None)
        ax.set_xlabel(panel["label"])
        ax.tick_params(labelleft=i == 0)
        if panel["key"] == "achieved_tflops" and any(r.get("utilization") is not None for r in done):
            ax.set_xlim(0, 1.3 * max(values + [1e-9]))  # room for the share of `raylab peak`'s product rate
            for name, value, r in zip(names, values, done):
                if r.get("utilization") is not None:
                    ax.annotate(f" {r['utilization']:.0%} of peak", (value, name), va="center", fontsize="small")


def draw_curves(ax, curves: list[dict]) -> None:
    """Test accuracy (or loss) after each epoch against wall time since the trial's start, a line per run in its
    framework's colour (a style per trial of one framework); a trial's repeats share its colour and label."""
    labelled: set[str] = set()
    for c in curves:
        xs, ys = zip(*c["points"])
        ax.plot(
            xs,
            ys,
            c["style"],
            marker="o",
            markersize=3,
            color=c["color"],
            label=None if c["trial"] in labelled else c["trial"],
        )
        labelled.add(c["trial"])
    metric = curves[0]["metric"]
    ax.set_xlabel("wall time since the trial started, s (start-up included)")
    ax.set_ylabel("test accuracy" if metric == "val_accuracy" else "test loss")
    ax.set_title(f"{'test accuracy' if metric == 'val_accuracy' else 'test loss'} after each epoch against wall time")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small", ncol=2)
