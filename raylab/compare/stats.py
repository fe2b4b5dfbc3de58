"""The measurement protocol over one invocation's trials, as read back from MLflow.

Pure functions over `raylab compare` rows (dicts): repeats folded into median and spread,
whether two trials differ beyond that spread, the parity report, scaling efficiency and
raylab's overhead against the plain scripts. Nothing here talks to MLflow or Ray.
"""

from __future__ import annotations

import math
import statistics

from raylab.registry import NAMES, framework
from raylab.task import model_settings

# Figures folded over repeats (median); samples/s also keeps its min..max spread.
FOLDED = ["samples_per_sec", "step_time_p50_ms", "step_time_p90_ms", "startup_s", "first_step_s", "wall_s",
          "val_accuracy", "time_to_target_s", "compile_time_warmup_s", "compiles_after_warmup", "steps_per_host_sync",
          "flops_per_sample", "achieved_tflops", "utilization", "vendor_utilization", "cost_usd", "cost_to_target_usd",
          *(f"startup_{p}_s" for p in ("workers", "imports", "setup", "data", "model", "other"))]
# What a warm start changes (raylab/driver/groups.py): folded per start, cold runs in the key, warm ones in KEY_warm,
# never one median over both.
BY_START = ["startup_s", "wall_s", "time_to_target_s", *(f"startup_{p}_s" for p in ("workers", "imports", "setup",
                                                                                  "data", "model", "other"))]
# What must match across the trials of a fair comparison: (row key, label).
# The built_* values are what each worker reports it built from the recipe's task (raylab/task/common.py).
PARITY = [("parameters", "parameters"), ("built_optimizer", "optimizer as built"),
          ("built_loss", "loss as built"),
          ("built_metrics", "metrics as built"), ("built_preprocess", "preprocessing as built"),
          ("precision_applied", "precision"), ("float32_matmul", "float32 matmul"),
          ("threads", "threads/replica"), ("data", "data"), ("shuffle", "shuffle"),
          ("train_samples", "train samples"), ("seed", "seed"), ("epochs", "epochs"),
          ("steps_per_epoch", "steps/epoch")]
PER_RUN_LENGTH = [("built_lr_schedule", "learning rate as built"), ("global_batch", "global batch")]
WALL_TARGET, SPS_TARGET = 1.05, 0.97  # raylab vs a plain script: whole-job time at most, samples/s at least


def rate(value: float) -> str:
    """samples/s for people: thousands separated, or 3 significant digits below 100 (a 30M-parameter step)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fold(rows: list[dict]) -> list[dict]:
    """One row per trial name, in first-seen order: medians over its finished repeats."""
    by_name: dict[str, list[dict]] = {}
    for row in rows:
        by_name.setdefault(row["trial"], []).append(row)
    folded = []
    for name, runs in by_name.items():
        done = [r for r in runs if r["status"] == "FINISHED"]
        status = runs[0]["status"] if len(runs) == 1 else ("FINISHED" if len(done) == len(runs) else
                                                            f"{len(done)}/{len(runs)}-finished")
        out = {**runs[0], "runs": len(runs), "finished": len(done), "status": status}
        for key in FOLDED:
            values = [r[key] for r in done if r.get(key) is not None]
            out[key] = statistics.median(values) if values else None
        fold_starts(out, done)
        sps = [r["samples_per_sec"] for r in done if r.get("samples_per_sec") is not None]
        out["sps_min"], out["sps_max"] = (min(sps), max(sps)) if sps else (None, None)
        out["sps_values"] = sps  # each repeat's, for the differences' intervals
        out["to_target_values"] = [r["time_to_target_s"] for r in done if r.get("time_to_target_s") is not None]
        out["cost_values"] = [r["cost_to_target_usd"] for r in done if r.get("cost_to_target_usd") is not None]
        out["error"] = next((r.get("error") for r in runs if r.get("error")), None)
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
        ratio, lo, hi = welch_ratio(fast["sps_values"], slow["sps_values"])
        repeats = f"{len(fast['sps_values'])}+{len(slow['sps_values'])} repeats"
        interval = f"95% CI {lo:.2f}x..{hi:.2f}x, Welch's t on log samples/s"
        if lo <= 1 <= hi:
            lines.append(f"{fast['trial']} vs {slow['trial']}: not distinguishable at {repeats} ({ratio:.2f}x the "
                         f"samples/s, {interval})")
        else:
            lines.append(f"{fast['trial']} vs {slow['trial']}: {ratio:.2f}x the samples/s ({interval}; {repeats})")
    return lines


def answer(folded: list[dict]) -> list[str]:
    """The comparison's answer: the fastest trial to the recipe's target, against the next, and with --prices the
    cheapest, the same way (the last lines of the report)."""
    return best_to_target(folded, "time_to_target_s", "to_target_values", ("fastest", "sooner", "seconds"),
                          "{:.1f} s".format) + \
        best_to_target(folded, "cost_to_target_usd", "cost_values", ("cheapest", "cheaper", "dollars"), "${:.4g}".format)


def best_to_target(folded: list[dict], key: str, values: str, words: tuple[str, str, str], shown) -> list[str]:
    """The trial that reached the recipe's target soonest, or cheapest (`key`: the median over the repeats that
    reached it; `values`: each repeat's), against the next one, with the interval where both have 2 repeats or
    more."""
    best_word, lead, unit = words
    ranked = sorted((r for r in folded if r.get(values)), key=lambda r: r[key])
    if not ranked:
        return []
    best = ranked[0]
    line = (f"{best_word} to target: {best['trial']}, {shown(best[key])} (reached in {len(best[values])} of "
            f"{best['runs']} repeat(s))")
    if len(ranked) > 1:
        after = ranked[1]
        interval = welch_ratio(after[values], best[values])
        if interval is None:
            line += f"; next {after['trial']}, {shown(after[key])} (no interval: fewer than 2 repeats)"
        else:
            ratio, lo, hi = interval
            verdict = "not distinguishable from" if lo <= 1 <= hi else f"{ratio:.2f}x {lead} than"
            line += (f"; {verdict} {after['trial']}, {shown(after[key])} (95% CI {lo:.2f}x..{hi:.2f}x, "
                     f"Welch's t on log {unit})")
    return [line]


# Student's t, two-sided 95%, by degrees of freedom; Welch's fractional degrees are rounded down to the next
# listed (a wider interval, never a narrower one).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


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
    df = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    t = next(T975[k] for k in sorted(T975, reverse=True) if k <= max(1, df))
    half = t * math.sqrt(va + vb)
    return math.exp(d), math.exp(d - half), math.exp(d + half)


def parity(rows: list[dict]) -> tuple[list[str], list[str]]:
    """(report lines, mismatches): each setting across the trials, and the ones that differ."""
    trials = [r for r in rows if r["status"] == "FINISHED"]
    lines, mismatches = [], []
    for key, label in PARITY:
        _same(trials, key, label, lines, mismatches)
    _execution(trials, lines, mismatches)
    hardware(trials, lines)
    work(trials, lines, mismatches)
    shown, differences = model_settings.compare({r["trial"]: r.get("model_settings") for r in trials})
    lines += shown
    if differences:
        mismatches.append("model settings")
    # What depends on the run's length and the replicas is compared within each worker count (and --batch size):
    # weak scaling grows the global batch with the replicas, so an x2 trial makes half the optimizer updates.
    swept = len({str(r.get("batch_per_replica")) for r in trials}) > 1
    for workers, size in sorted({(r["workers"], str(r.get("batch_per_replica"))) for r in trials}):
        group = [r for r in trials if r["workers"] == workers and str(r.get("batch_per_replica")) == size]
        where = f" at x{workers}" + (f" b{size}" if swept else "")
        for key, label in PER_RUN_LENGTH:
            _same(group, key, label + where, lines, mismatches)
    scaled = [r for r in trials if r.get("loss_scale") is not None]
    if scaled:  # fp16: each framework's own dynamic loss scale (Keras starts at 2**15, torch at 2**16)
        lines.append("    fp16 loss scale (final, steps skipped): " + ", ".join(
            f"{r['trial']} {r['loss_scale']:g}, {r['skipped_steps']:.0f} skipped" for r in scaled))
    synthetic = sorted({r["trial"] for r in trials if r.get("data_synthetic")})
    if synthetic:
        lines.append("    data is synthetic: throughput only, no accuracy claims")
    over = sorted({r["trial"] for r in trials if r.get("oversubscribed")})
    if over:
        mismatches.append("oversubscribed")
        lines.append(f"  ! oversubscribed (fewer CPUs than threads): {', '.join(over)}")
    return lines, mismatches


def scaling(folded: list[dict]) -> list[str]:
    """Per framework:strategy with a 1-worker trial: samples/s at N workers over N x that of 1 worker."""
    lines = []
    kinds = dict.fromkeys(f"{r['framework']}:{r['strategy']}" for r in folded)
    for kind in kinds:
        runs = {r["workers"]: r for r in folded if f"{r['framework']}:{r['strategy']}" == kind
                and r.get("samples_per_sec") is not None and r.get("strategy") != "plain"}
        if 1 not in runs or len(runs) < 2:
            continue
        base = runs[1]["samples_per_sec"]
        steps = [f"x{n} {runs[n]['samples_per_sec'] / base:.2f}x (efficiency {runs[n]['samples_per_sec'] / (n * base):.2f})"
                 for n in sorted(runs) if n > 1]
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
        lines.append(f"{r['trial']} vs {base['trial']}: samples/s {sps:.3f}x, whole-job wall {wall_text}"
                     f" ({r['wall_s']:.1f} s vs {base['wall_s']:.1f} s){verdict}")
    return lines


def startup(folded: list[dict]) -> list[str]:
    """Each trial's fixed cost before its first step, phase by phase (medians)."""
    lines = []
    for r in folded:
        phases = [(p, r.get(f"startup_{p}_s"))
                  for p in ("process", "workers", "imports", "setup", "data", "model", "other")]
        if r.get("startup_s") is None or phases[1][1] is None:
            continue
        parts = " + ".join(f"{p} {v:.1f}" for p, v in phases if v is not None)
        floor = f" (floor {r['startup_floor_s']:.1f})" if r.get("startup_floor_s") is not None else ""
        start = {"warm": " warm", "cold+warm": " cold"}.get(r.get("start"), "")
        warm = f"; warm {r['startup_s_warm']:.1f} s" if r.get("startup_s_warm") is not None else ""
        lines.append(f"{r['trial']}: {r['startup_s']:.1f} s{start}{floor} = {parts}{warm}")
    return lines


def _execution(trials: list[dict], lines: list, mismatches: list) -> None:
    """Each trial's execution. Each framework's best against the others' (--compile best: every candidate measured
    on the model, the faster trained) is fair, with the candidates shown; so is compiled against compiled (Inductor,
    XLA, jit). Compiled against not compiled where --compile forced it (eager torch, a TF graph without XLA) is a
    difference, with the fix. Then what changes speed but not the math: the optimizer's implementation."""
    runs = {r["trial"]: (r.get("execution"), r.get("compiled")) for r in trials if r.get("execution") is not None}
    _optimizer_impl(trials, lines, mismatches)
    if not runs:
        return
    if all(r.get("execution_choice") == "best" for r in trials if r["trial"] in runs):
        won: dict = {}  # (execution, its race) -> the trials that ran it
        for r in trials:
            if r["trial"] in runs:
                raced = str(r.get("execution_candidates"))
                won.setdefault((r["execution"], raced if ";" in raced else "its only candidate"), []).append(r["trial"])
        lines.append("    execution (each framework's best, measured before its trials: --compile best): " + "; ".join(
            f"{e} ({raced}): {', '.join(ts)}" for (e, raced), ts in won.items()))
        return
    by = {}
    for t, (e, _) in runs.items():
        by.setdefault(e, []).append(t)
    listed = "; ".join(f"{e}: {', '.join(ts)}" for e, ts in by.items())
    both = {(r["framework"], r.get("requested_strategy"), r["workers"]) for r in trials if str(r.get("compiled")) == "True"} & \
        {(r["framework"], r.get("requested_strategy"), r["workers"]) for r in trials if str(r.get("compiled")) == "False"}
    if both:  # --compile off,on: a trial both ways is an axis, as a --batch sweep is; the table names each execution
        lines.append(f"    execution (swept: compare compiled with compiled): {listed}")
    elif len({str(c) for _, c in runs.values()}) > 1:
        mismatches.append("execution")
        lines.append(f"  ! execution (compiled against not): {listed}; run them all compiled with --compile on "
                     "(or both ways with --compile off,on)")
    else:
        kind = {"True": " (compiled)", "False": " (not compiled)"}.get(str(next(iter(runs.values()))[1]), "")
        lines.append(f"    execution{kind}: {listed}")


def _optimizer_impl(trials: list[dict], lines: list, mismatches: list) -> None:
    """How each framework's optimizer runs its update (torch: fused, foreach or per-tensor; recorded where the
    framework has a choice): shown; two trials of one framework that differ in it are a difference."""
    impls = {r["trial"]: (r["framework"], r["optimizer_impl"]) for r in trials if r.get("optimizer_impl")}
    if not impls:
        return
    listed = ", ".join(f"{t} {impl}" for t, (_, impl) in impls.items())
    if any(len({i for f, i in impls.values() if f == fw}) > 1 for fw, _ in impls.values()):
        mismatches.append("optimizer implementation")
        lines.append(f"  ! optimizer implementation (within a framework): {listed}")
    else:
        lines.append(f"    optimizer implementation: {listed}")


WORK_APART = 1.10  # counts of one step's work further apart than this: the models differ, or a counter misses an op


def flops(value: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if value >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g} FLOP"


def work(trials: list[dict], lines: list, mismatches: list) -> None:
    """Work per sample (one step's forward pass and gradients, each framework's own count): within 10% across the
    trials, or a mismatch naming each trial's count."""
    counted = {r["trial"]: r["flops_per_sample"] for r in trials if r.get("flops_per_sample")}
    if not counted:
        return
    low, high = min(counted.values()), max(counted.values())
    if high > WORK_APART * low:
        mismatches.append("work per sample")
        lines.append("  ! work per sample (forward and gradients, each framework's own counter) over 10% apart, the "
                     "models differ or a counter misses an op: " + ", ".join(f"{t} {flops(v)}" for t, v in counted.items()))
    else:
        span = flops(low) if flops(low) == flops(high) else f"{flops(low)}..{flops(high)}"
        lines.append(f"    work per sample (forward and gradients, each framework's own counter): {span}")


def hardware(trials: list[dict], lines: list) -> None:
    """What the trials ran on: one line, or, where --device swept it, the axis with each trial's (never a mismatch:
    the comparison asked for it; each trial's utilization is against its own hardware's peak)."""
    ran = list(dict.fromkeys(r["hardware"] for r in trials if r.get("hardware")))  # each trial's name says its own
    if len(ran) > 1:
        lines.append(f"    hardware (swept, the axis compared): {', '.join(ran)}")
    elif ran:
        lines.append(f"    hardware: {ran[0]}")


def _same(trials: list[dict], key: str, label: str, lines: list, mismatches: list) -> None:
    values = {r["trial"]: r.get(key) for r in trials if r.get(key) is not None}
    distinct = sorted({str(v) for v in values.values()})
    if len(distinct) > 1:
        mismatches.append(label)
        lines.append(f"  ! {label}: " + ", ".join(f"{t} {v}" for t, v in values.items()))
    elif distinct:
        lines.append(f"    {label}: {distinct[0]}")
