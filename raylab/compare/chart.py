"""The comparison's chart: a PNG of the trials side by side (throughput, step time, accuracy; the work done, time and
cost to the target where recorded; accuracy against wall time), written by `raylab compare` and at the end of every
invocation, and logged with the parent run."""

from __future__ import annotations

from pathlib import Path

from raylab.registry import frameworks

# The second row, where a trial recorded it: (key, axis label, scale to the label's unit)
MORE = [("achieved_tflops", "work done, GFLOP/s (forward and gradients, each framework's count)", 1000.0),
        ("time_to_target_s", "time to the recipe's target, s (start-up included)", 1.0),
        ("cost_to_target_usd", "cost to the recipe's target, US$ (--prices)", 1.0)]


def write_chart(rows: list[dict], path: Path, title: str, lines: list[dict] | None = None) -> Path:
    """Throughput (with the p50..p90 step-time spread) and accuracy per trial; where recorded, the work done
    (GFLOP/s, with the share of the peak), the time and the cost to the target; and with `lines` (curves()) test
    accuracy against wall time, a curve per trial run, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r.get("samples_per_sec") is not None]
    names = [r["trial"] for r in done]
    palette = {fw.name: fw.color for fw in frameworks()}
    colors = [palette.get(r["framework"], "tab:gray") for r in done]
    bars_h = 0.6 * max(len(done), 3) + 1.5
    more = [m for m in MORE if any(r.get(m[0]) is not None for r in done)]
    heights = [bars_h] + ([bars_h] if more else []) + ([4.5] if lines else [])
    fig = plt.figure(figsize=(15, sum(heights)))
    grid = fig.add_gridspec(len(heights), 3, height_ratios=heights)
    axes = [fig.add_subplot(grid[0, 0])]
    axes += [fig.add_subplot(grid[0, i], sharey=axes[0]) for i in (1, 2)]
    for ax in axes[1:]:
        ax.tick_params(labelleft=False)
    if more:
        draw_more([fig.add_subplot(grid[1, i], sharey=axes[0]) for i in range(len(more))], more, done, colors)
    if lines:
        draw_curves(fig.add_subplot(grid[len(heights) - 1, :]), lines)
    sps = [r["samples_per_sec"] for r in done]
    ranges = [[v - (r.get("sps_min") or v) for v, r in zip(sps, done)], [(r.get("sps_max") or v) - v for v, r in zip(sps, done)]]
    axes[0].barh(names, sps, xerr=ranges if any(map(any, ranges)) else None, color=colors, capsize=3)
    axes[0].set_xlabel("steady-state samples/s (global; median, whisker min..max over repeats)")
    p50 = [r["step_time_p50_ms"] for r in done]
    spread = [[0] * len(done), [r["step_time_p90_ms"] - r["step_time_p50_ms"] for r in done]]
    axes[1].barh(names, p50, xerr=spread, color=colors, capsize=3)
    axes[1].set_xlabel("step time ms (bar p50, whisker p90)")
    if any(r.get("val_accuracy") is not None for r in done):
        axes[2].barh(names, [r["val_accuracy"] or 0.0 for r in done], color=colors)
        low = min([r["val_accuracy"] for r in done if r["val_accuracy"] is not None] + [1.0])
        axes[2].set_xlim(max(0.0, low - 0.05), 1.0)
        axes[2].set_xlabel("test accuracy")
    else:  # a task without accuracy (regression, segmentation): its test loss
        axes[2].barh(names, [r.get("val_loss") or 0.0 for r in done], color=colors)
        axes[2].set_xlabel("test loss")
    axes[0].invert_yaxis()
    from matplotlib.patches import Patch

    axes[2].legend(handles=[Patch(color=fw.color, label=fw.title) for fw in frameworks()
                            if any(r["framework"] == fw.name for r in done)], loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_more(axes, more: list, done: list[dict], colors: list) -> None:
    """The second row: a panel per MORE figure some trial recorded; GFLOP/s with each trial's share of the peak."""
    names = [r["trial"] for r in done]
    for i, (ax, (key, label, scale)) in enumerate(zip(axes, more)):
        values = [(r.get(key) or 0.0) * scale for r in done]
        ax.barh(names, values, color=colors)
        ax.set_xlabel(label)
        ax.tick_params(labelleft=i == 0)
        if key == "achieved_tflops" and any(r.get("utilization") is not None for r in done):
            ax.set_xlim(0, 1.3 * max(values + [1e-9]))  # room for the share of `raylab peak`'s product rate
            for name, value, r in zip(names, values, done):
                if r.get("utilization") is not None:
                    ax.annotate(f" {r['utilization']:.0%} of peak", (value, name), va="center", fontsize="small")


def draw_curves(ax, lines: list[dict]) -> None:
    """Test accuracy (or loss) after each epoch against wall time since the trial's start, a line per run;
    a trial's repeats share its colour and label."""
    trials = list(dict.fromkeys(c["trial"] for c in lines))
    cycle = [f"C{i % 10}" for i in range(len(trials))]
    styles = ["-", "--", ":", "-."]
    labelled: set[str] = set()
    for c in lines:
        i = trials.index(c["trial"])
        xs, ys = zip(*c["points"])
        ax.plot(xs, ys, styles[(i // 10) % 4], marker="o", markersize=3, color=cycle[i],
                label=None if c["trial"] in labelled else c["trial"])
        labelled.add(c["trial"])
    metric = lines[0]["metric"]
    ax.set_xlabel("wall time since the trial started, s (start-up included)")
    ax.set_ylabel("test accuracy" if metric == "val_accuracy" else "test loss")
    ax.set_title(f"{'test accuracy' if metric == 'val_accuracy' else 'test loss'} after each epoch against wall time")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small", ncol=2)
