"""The measurement protocol over one invocation's trials, as read back from MLflow.

Pure functions over `raylab compare` rows (dicts): repeats folded into median and spread, whether two trials differ
beyond that spread (Welch's t), scaling efficiency and raylab's overhead against the plain scripts. (The parity report:
raylab/compare/parity.py.) Nothing here talks to MLflow or Ray.
"""

from __future__ import annotations

import math
import statistics
import warnings

from raylab.registry import NAMES, framework

# The headline figures, in the order every table and summary shows them (raylab compare's rows, the --json summary).
HEADLINE = [
    "samples_per_sec",
    "step_time_p50_ms",
    "step_time_p90_ms",
    "startup_s",
    "first_step_s",
    "wall_s",
    "val_accuracy",
]
# Figures folded over repeats (median); samples/s also keeps its min..max spread.
FOLDED = [
    *HEADLINE,
    "time_to_target_s",
    "compile_time_warmup_s",
    "compiles_after_warmup",
    "steps_per_host_sync",
    "flops_per_sample",
    "achieved_tflops",
    "steady_s",
    "utilization",
    "vendor_utilization",
    "cost_usd",
    "cost_to_target_usd",
    *(f"startup_{p}_s" for p in ("workers", "imports", "setup", "data", "model", "other")),
]
# What a warm start changes (raylab/driver/groups.py): folded per start, cold runs in the key, warm ones in KEY_warm,
# never one median over both.
BY_START = [
    "startup_s",
    "wall_s",
    "time_to_target_s",
    *(f"startup_{p}_s" for p in ("workers", "imports", "setup", "data", "model", "other")),
]
WALL_TARGET, SPS_TARGET = 1.05, 0.97  # raylab vs a plain script: whole-job time at most, samples/s at least


def rate(value: float) -> str:
    """samples/s for people: thousands separated, or 3 significant digits below 100 (a 30M-parameter step)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fold(rows: list[dict]) -> list[dict]:
    """One row per trial name, in first-seen order: medians over its finished repeats."""
    from raylab.compare.parity import BESIDE_MIN_S  # (stats.parity is the old path of parity.parity)

    by_name: dict[str, list[dict]] = {}
    for row in rows:
        by_name.setdefault(row["trial"], []).append(row)
    folded = []
    for name, runs in by_name.items():
        done = [r for r in runs if r["status"] == "FINISHED"]
        status = (
            runs[0]["status"]
            if len(runs) == 1
            else ("FINISHED" if len(done) == len(runs) else f"{len(done)}/{len(runs)}-finished")
        )
        out = {**runs[0], "runs": len(runs), "finished": len(done), "status": status}
        for key in FOLDED:
            values = [r[key] for r in done if r.get(key) is not None]
            out[key] = statistics.median(values) if values else None
        fold_starts(out, done)
        sps = [r["samples_per_sec"] for r in done if r.get("samples_per_sec") is not None]
        out["sps_min"], out["sps_max"] = (min(sps), max(sps)) if sps else (None, None)
        out["sps_values"] = sps  # each repeat's, for the differences' intervals
        # each finished repeat to the target: its start, the figures (None: it missed) and its start-up (answer())
        out["to_target_runs"] = [
            {
                "start": r.get("start") or "cold",
                "startup_s": r.get("startup_s"),
                "time_to_target_s": r.get("time_to_target_s"),
                "cost_to_target_usd": r.get("cost_to_target_usd"),
                "price_usd_per_hour": r.get("price_usd_per_hour"),
            }
            for r in done
        ]
        out["error"] = next((r.get("error") for r in runs if r.get("error")), None)
        judged = [r for r in done if (r.get("beside_s") or 1e9) >= BESIDE_MIN_S] or done
        for key in ("beside_cores", "steal_cores"):  # the most beside any repeat: one crowded repeat is marked
            values = [r[key] for r in judged if r.get(key) is not None]
            out[key] = max(values) if values else None
        out["beside_s"] = min((r["beside_s"] for r in judged if r.get("beside_s") is not None), default=None)
        restarted = any(r.get("restarts") for r in runs)
        for key in ("restarts", "recovery_s", "lost_s"):  # restarts are summed over repeats, not medians
            out[key] = sum(r.get(key) or 0 for r in runs) if restarted else None
        folded.append(out)
    return folded


def fold_starts(out: dict, done: list[dict]) -> None:
    """The start-up figures of a trial's runs, cold and warm apart: `start` is "cold", "warm" or "cold+warm"; with
    both, KEY holds the cold runs' median and KEY_warm the warm runs'."""
    starts = sorted({r.get("start") or "cold" for r in done}) or [out.get("start") or "cold"]
    out["start"] = "+".join(starts)
    if len(starts) < 2:
        return
    for key in BY_START:
        for start, name in (("cold", key), ("warm", f"{key}_warm")):
            values = [r[key] for r in done if (r.get("start") or "cold") == start and r.get(key) is not None]
            out[name] = statistics.median(values) if values else None


def shown_startup(row: dict) -> str | None:
    """The table's start-up cell: cold figures bare, warm ones marked w ("10.3 / 0.4w")."""
    cold, warm = row.get("startup_s"), row.get("startup_s_warm")
    if row.get("start") == "warm":
        return None if cold is None else f"{cold:.1f}w"
    if warm is not None:
        return f"{cold:.1f} / {warm:.1f}w" if cold is not None else f"{warm:.1f}w"
    return None if cold is None else f"{cold:.1f}"


def significance(folded: list[dict]) -> list[str]:
    """Neighbours in throughput order, each pair with 2 repeats or more: the faster one's lead with its 95% interval
    (Welch's t on log samples/s), or "not distinguishable" where the interval holds 1."""
    ranked = sorted((r for r in folded if len(r.get("sps_values") or []) >= 2), key=lambda r: -r["samples_per_sec"])
    lines = []
    for fast, slow in zip(ranked, ranked[1:]):
        interval = welch_ratio(fast["sps_values"], slow["sps_values"])
        if interval is None:
            continue
        n_a, n_b = len(fast["sps_values"]), len(slow["sps_values"])
        shown = ci(interval, "samples/s", n_a, n_b)
        if interval[1] <= 1 <= interval[2]:
            lines.append(
                f"{fast['trial']} vs {slow['trial']}: not distinguishable at {n_a}+{n_b} repeats "
                f"({interval[0]:.2f}x the samples/s, {shown})"
            )
        else:
            lines.append(
                f"{fast['trial']} vs {slow['trial']}: {interval[0]:.2f}x the samples/s ({shown}; {n_a}+{n_b} repeats)"
            )
    return lines


def ci(interval: tuple[float, float, float], unit: str, n_a: int, n_b: int) -> str:
    """The interval as the report shows it: a point where the repeats did not vary at all (they claim no
    certainty: more repeats show the noise), and a hint to add repeats where it holds 1."""
    ratio, lo, hi = interval
    if lo == hi:
        return f"no spread in {n_a}+{n_b} repeats: no interval to show; add repeats (--repeats) to measure the noise"
    text = f"95% CI {lo:.2f}x..{hi:.2f}x, Welch's t on log {unit}"
    return text + ("; add repeats (--repeats) to tell them apart" if lo <= 1 <= hi else "")


# Student's t, two-sided 95%, by degrees of freedom; Welch's fractional degrees are rounded down to the next
# listed (a wider interval, never a narrower one).
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def welch_ratio(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """(ratio, low, high): a's geometric mean over b's with its 95% interval, Welch's t on the logs (their
    variances unequal, their counts small); None with fewer than 2 values on a side."""
    if len(a) < 2 or len(b) < 2 or min(a + b) <= 0:
        return None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    d = statistics.fmean(la) - statistics.fmean(lb)
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    if va + vb == 0:
        return math.exp(d), math.exp(d), math.exp(d)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    t = next(T975[k] for k in sorted(T975, reverse=True) if k <= max(1, df))
    half = t * math.sqrt(va + vb)
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def scaling(folded: list[dict]) -> list[str]:
    """Per framework:strategy with a 1-worker trial: samples/s at N workers over N x that of 1 worker."""
    lines = []
    kinds = dict.fromkeys(f"{r['framework']}:{r['strategy']}" for r in folded)
    for kind in kinds:
        runs = {
            r["workers"]: r
            for r in folded
            if f"{r['framework']}:{r['strategy']}" == kind
            and r.get("samples_per_sec") is not None
            and r.get("strategy") != "plain"
        }
        if 1 not in runs or len(runs) < 2:
            continue
        base = runs[1]["samples_per_sec"]
        steps = [
            f"x{n} {runs[n]['samples_per_sec'] / base:.2f}x (efficiency {runs[n]['samples_per_sec'] / (n * base):.2f})"
            for n in sorted(runs)
            if n > 1
        ]
        lines.append(f"{kind}: x1 {rate(base)} samples/s; " + ", ".join(steps))
    return lines


def overhead(folded: list[dict]) -> list[str]:
    """Each 1-worker trial against its framework's plain script (medians), with the targets."""
    plain = {r["framework"]: r for r in folded if r.get("strategy") == "plain" and r.get("samples_per_sec")}
    lines = []
    for r in folded:
        base = plain.get(r["framework"])
        if base is None or r.get("strategy") == "plain" or r["workers"] != 1 or not r.get("samples_per_sec"):
            continue
        sps = r["samples_per_sec"] / base["samples_per_sec"]
        wall = r["wall_s"] / base["wall_s"] if r.get("wall_s") and base.get("wall_s") else None
        same = r["framework"] in NAMES and r["strategy"] == framework(r["framework"]).single  # what the plain mirrors
        verdict = ""
        if same:
            met = sps >= SPS_TARGET and (wall is not None and wall <= WALL_TARGET)
            verdict = f"  targets wall <= {WALL_TARGET}x, samples/s >= {SPS_TARGET}x: {'met' if met else 'NOT met'}"
        wall_text = f"{wall:.2f}x" if wall is not None else "-"
        lines.append(
            f"{r['trial']} vs {base['trial']}: samples/s {sps:.3f}x, whole-job wall {wall_text}"
            f" ({r['wall_s']:.1f} s vs {base['wall_s']:.1f} s){verdict}"
        )
    return lines


def startup(folded: list[dict]) -> list[str]:
    """Each trial's fixed cost before its first step, phase by phase (medians)."""
    lines = []
    for r in folded:
        phases = [
            (p, r.get(f"startup_{p}_s")) for p in ("process", "workers", "imports", "setup", "data", "model", "other")
        ]
        if r.get("startup_s") is None or phases[1][1] is None:
            continue
        parts = " + ".join(f"{p} {v:.1f}" for p, v in phases if v is not None)
        floor = f" (floor {r['startup_floor_s']:.1f})" if r.get("startup_floor_s") is not None else ""
        start = {"warm": " warm", "cold+warm": " cold"}.get(r.get("start"), "")
        warm = f"; warm {r['startup_s_warm']:.1f} s" if r.get("startup_s_warm") is not None else ""
        lines.append(f"{r['trial']}: {r['startup_s']:.1f} s{start}{floor} = {parts}{warm}")
    return lines


MOVED_TO_PARITY = ("parity", "PARITY", "PER_RUN_LENGTH", "WORK_APART", "flops", "work", "hardware")


def __getattr__(name: str):
    """The parity report's names, moved to raylab.compare.parity: kept here for a release, with a warning."""
    if name in MOVED_TO_PARITY:
        from raylab._moved import REMOVED_IN_NEXT
        from raylab.compare import parity

        warnings.warn(
            f"raylab.compare.stats.{name} moved to raylab.compare.parity.{name}; import it from there "
            f"(the old name goes in raylab {REMOVED_IN_NEXT})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(parity, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
