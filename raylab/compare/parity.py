"""The parity report: what must match across one invocation's trials for a fair comparison, and what differs.

Pure functions over `raylab compare` rows (dicts), as raylab/compare/stats.py's statistics are: each setting the
workers report they built (optimizer, loss, metrics, preprocessing, precision, threads, data, seeds, length), the
execution each trial ran, the hardware, the work per sample each framework's own counter counted, the model's
settings. Nothing here talks to MLflow or Ray.
"""

from __future__ import annotations

import statistics

from raylab.task import model_settings

# Seconds of steady steps a samples/s figure needs to mean something: under it a trial is "too short to time".
# Measured (issue 71, this 2-core VM, 2026-11-29): the fashion MLP's jax:none over 3 epochs (0.3 s of steps) read
# 0.76x of its plain loop in one round and 1.12-1.40x in the next; over 12 epochs (1-4 s) 1.12-1.28x; bench/'s
# rule for any figure it quotes is 5 s of steady steps or more a side.
STEADY_FLOOR_S = 5.0

# Cores of other work (and stolen time) beside a trial's timed window above which its figure was not measured alone
# (raylab/loop/beside.py): the processes that are neither the trial's nor Ray's nor its job's, as the driver's own
# bookkeeping and the kernel, read 0.0-0.1 of a core beside a trial alone on the 2-core VM (2026-12-06); a second job's
# trial, a compile or a user's process reads a quarter of a core or more.
BESIDE_MAX_CORES = 0.25
# A window shorter than this is not judged: /proc counts CPU time in ticks of 10 ms, so over 0.1 s one tick of another
# process reads as a tenth of a core (such a trial is too short to time anyway, STEADY_FLOOR_S)
BESIDE_MIN_S = 1.0

# What must match across the trials of a fair comparison: (row key, label).
# The built_* values are what each worker reports it built from the recipe's task (raylab/task/common.py).
PARITY = [
    ("parameters", "parameters"),
    ("built_optimizer", "optimizer as built"),
    ("built_loss", "loss as built"),
    ("built_metrics", "metrics as built"),
    ("built_preprocess", "preprocessing as built"),
    ("precision_applied", "precision"),
    ("float32_matmul", "float32 matmul"),
    ("threads", "threads/replica"),
    ("data", "data"),
    ("shuffle", "shuffle"),
    ("train_samples", "train samples"),
    ("seed", "seed"),
    ("epochs", "epochs"),
    ("steps_per_epoch", "steps/epoch"),
]
PER_RUN_LENGTH = [("built_lr_schedule", "learning rate as built"), ("global_batch", "global batch")]


def parity(rows: list[dict]) -> tuple[list[str], list[str]]:
    """(report lines, mismatches): each setting across the trials, and the ones that differ."""
    trials = [r for r in rows if r["status"] == "FINISHED"]
    lines, mismatches = [], []
    for key, label in PARITY:
        _same(trials, key, label, lines, mismatches)
    _execution(trials, lines, mismatches)
    hardware(trials, lines)
    work(trials, lines, mismatches)
    shown, differences = model_settings.compare(
        {r["trial"]: r.get("model_settings") for r in trials}, {r["trial"]: r.get("activations") for r in trials}
    )
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
        lines.append(
            "    fp16 loss scale (final, steps skipped): "
            + ", ".join(f"{r['trial']} {r['loss_scale']:g}, {r['skipped_steps']:.0f} skipped" for r in scaled)
        )
    synthetic = sorted({r["trial"] for r in trials if r.get("data_synthetic")})
    if synthetic:
        lines.append("    data is synthetic: throughput only, no accuracy claims")
    if timed := [r for r in trials if r.get("seconds")]:  # --seconds: each ended at its own step
        lines.append(
            f"    length: each trial ended at {float(timed[0]['seconds']):g} s of steady steps (--seconds), after "
            + ", ".join(f"{r['trial']} {r.get('steps_trained') or 0:,.0f}" for r in timed)
            + " steps: its accuracy comes from that many steps, not compared"
        )
    if short := too_short(trials):  # said, not a mismatch: the settings are alike, the figure is thin
        lines.append(
            f"  ? too short to time (under {STEADY_FLOOR_S:g} s of steady steps, samples/s is not a figure "
            "to compare): " + ", ".join(f"{t} {s:.1f} s" for t, s in short)
        )
    if crowded := beside(trials):  # a figure that shared its node's cores is not the figure of the trial alone
        mismatches.append("measured beside other work")
        lines.append(
            f"  ! measured beside other work (over {BESIDE_MAX_CORES:g} of a core, or stolen by the "
            "hypervisor, over the steady window): " + "; ".join(crowded) + ". Rerun them on a quiet node "
            "(another job on the cluster? `ray status`, `top`), or with --repeats to see the spread"
        )
    over = sorted({r["trial"] for r in trials if r.get("oversubscribed")})
    if over:
        mismatches.append("oversubscribed")
        lines.append(f"  ! oversubscribed (fewer CPUs than threads): {', '.join(over)}")
    return lines, mismatches


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
        lines.append(
            "    execution (each framework's best, measured before its trials: --compile best): "
            + "; ".join(f"{e} ({raced}): {', '.join(ts)}" for (e, raced), ts in won.items())
        )
        return
    by = {}
    for t, (e, _) in runs.items():
        by.setdefault(e, []).append(t)
    listed = "; ".join(f"{e}: {', '.join(ts)}" for e, ts in by.items())
    both = {
        (r["framework"], r.get("requested_strategy"), r["workers"]) for r in trials if str(r.get("compiled")) == "True"
    } & {
        (r["framework"], r.get("requested_strategy"), r["workers"]) for r in trials if str(r.get("compiled")) == "False"
    }
    if both:  # --compile off,on: a trial both ways is an axis, as a --batch sweep is; the table names each execution
        lines.append(f"    execution (swept: compare compiled with compiled): {listed}")
    elif len({str(c) for _, c in runs.values()}) > 1:
        mismatches.append("execution")
        lines.append(
            f"  ! execution (compiled against not): {listed}; run them all compiled with --compile on "
            "(or both ways with --compile off,on)"
        )
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


WORK_APART = 1.02  # counts of one step's work further apart than this: the models differ, or a counter misses an op
# (the three frameworks' counters agree exactly on every bundled model; 2% leaves room for a framework's own
# rewriting of an op, never for a layer more or less)


def flops(value: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if value >= scale:
            return f"{value / scale:.4g} {unit}"
    return f"{value:.4g} FLOP"


def work(trials: list[dict], lines: list, mismatches: list) -> None:
    """Work per sample (one step's forward pass and gradients, each framework's own count): within WORK_APART
    across the trials, or a mismatch naming each trial's count. A trial without a count (a streamed one, a counter
    that failed or found nothing it knows: 0 is never a count) is named with its reason: its work is not shown
    alike, and its utilization is not computed. (The plain scripts, the yardstick, count nothing by design.)"""
    counted = {r["trial"]: r["flops_per_sample"] for r in trials if r.get("flops_per_sample")}
    missing = {
        r["trial"]: not_counted(r)
        for r in trials
        if not r.get("flops_per_sample")
        and r["trial"] not in counted
        and r.get("strategy") != "plain"
        and (counted or r.get("flops_count") or r.get("flops_per_sample") is not None)
    }
    if missing and counted:
        lines.append(
            "  ? work per sample not counted, so not shown alike: "
            + "; ".join(f"{t} ({why})" for t, why in missing.items())
        )
    elif missing:
        reasons = sorted(set(missing.values()))
        lines.append(f"    work per sample: not counted ({'; '.join(reasons)})")
    if not counted:
        return
    low, high = min(counted.values()), max(counted.values())
    if high > WORK_APART * low:
        mismatches.append("work per sample")
        lines.append(
            f"  ! work per sample (forward and gradients, each framework's own counter) over "
            f"{WORK_APART - 1:.0%} apart, the models differ or a counter misses an op: "
            + ", ".join(f"{t} {flops(v)}" for t, v in counted.items())
        )
    else:
        span = flops(low) if flops(low) == flops(high) else f"{flops(low)}..{flops(high)}"
        lines.append(f"    work per sample (forward and gradients, each framework's own counter): {span}")


def not_counted(row: dict) -> str:
    """Why a trial has no work per sample: its worker's reason, a kind that counts nothing (the parameter-server
    loops), or a 0 recorded before counts of 0 were refused."""
    how = row.get("flops_count")
    if how is None and row.get("flops_per_sample") is None:
        return "its kind records no count"
    if how and how.startswith("not counted"):
        return how.removeprefix("not counted").removeprefix(": ") or "no reason recorded"
    return "the counter found nothing it counts (0 recorded)"


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


def too_short(rows: list[dict]) -> list[tuple[str, float]]:
    """(trial, its median seconds of steady steps) of each finished trial whose samples/s rests on less than
    STEADY_FLOOR_S, in first-seen order."""
    seconds: dict[str, list[float]] = {}
    for r in rows:
        if r.get("steady_s") is not None:  # a finished run's (folded: the median of its finished repeats')
            seconds.setdefault(r["trial"], []).append(r["steady_s"])
    return [(t, statistics.median(v)) for t, v in seconds.items() if statistics.median(v) < STEADY_FLOOR_S]


def beside(rows: list[dict]) -> list[str]:
    """One line per finished run measured beside more than BESIDE_MAX_CORES of other work or stolen time
    ("tf:none x1 beside 0.93 cores of other work, 0.01 stolen"), repeats numbered."""
    out, runs = [], [r["trial"] for r in rows]
    for r in rows:
        other, stolen = r.get("beside_cores"), r.get("steal_cores")
        if (other is None and stolen is None) or (r.get("beside_s") or BESIDE_MIN_S) < BESIDE_MIN_S:
            continue
        if (other or 0.0) + (stolen or 0.0) > BESIDE_MAX_CORES:
            name = r["trial"] + (f" (repeat {r.get('repeat')})" if runs.count(r["trial"]) > 1 else "")
            out.append(f"{name} beside {other or 0:.2f} cores of other work, {stolen or 0:.2f} stolen")
    return out
