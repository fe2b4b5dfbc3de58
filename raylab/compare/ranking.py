"""The answers: the trials ranked by steady samples/s, and the fastest and the cheapest to the recipe's target.

By throughput (by_speed): a figure is ranked when its trial finished, its samples/s rests on parity.STEADY_FLOOR_S or
more of steady steps, and nothing else ran beside it over that window (parity.beside); the others are named with why. A
comparison whose settings differ (an UNFAIR verdict for anything but what ran beside) ranks nothing. Pure functions over
folded `raylab compare` rows (raylab/compare/stats.py fold()).

To the target (answer): the trial that reached the recipe's target soonest, or cheapest with --prices, against the
next, over like runs (basis()), with Welch's interval where both have 2 repeats or more.
"""

from __future__ import annotations

import math
import statistics

from raylab.compare import parity
from raylab.compare.stats import ci, rate, welch_ratio

BESIDE = "measured beside other work"  # the one mismatch ranking handles itself: such trials are left out


def unranked(row: dict) -> str | None:
    """Why a folded row's samples/s is not ranked, or None where it is."""
    if row.get("samples_per_sec") is None:
        return "no figure" if row.get("status") == "FINISHED" else (row.get("status") or "not finished").lower()
    if parity.too_short([row]):
        return f"too short to time: {row['steady_s']:.1f} s of steady steps"
    if parity.beside([row]):
        return f"beside {row.get('beside_cores') or 0:.2f} cores of other work"
    return None


def by_speed(folded: list[dict], mismatches: list[str]) -> list[str]:
    """The report's lines: the fastest trial and each other's share of its samples/s, fastest first; what is not
    ranked and why. Nothing where fewer than two trials ran."""
    if len(folded) < 2:
        return []
    other = [m for m in mismatches if m != BESIDE]
    if other:
        return [f"none ranked: the trials differ in {', '.join(other)} (the parity report above says how)"]
    ranked = sorted((r for r in folded if unranked(r) is None), key=lambda r: -r["samples_per_sec"])
    lines = []
    if ranked:
        top, repeats = ranked[0], max(len(r.get("sps_values") or [1]) for r in ranked)
        rest = ", ".join(f"{r['trial']} {r['samples_per_sec'] / top['samples_per_sec']:.2f}x" for r in ranked[1:])
        lines.append(
            f"fastest: {top['trial']}, {rate(top['samples_per_sec'])} samples/s"
            + (f"; then {rest}" if rest else "")
            + (
                f" (medians of {repeats} repeats: the differences above say which gaps hold)"
                if repeats > 1
                else " (one run each: a gap of a few percent may be this machine's noise; --repeats 3 tests it)"
            )
        )
    left = [f"{r['trial']} ({why})" for r in folded if (why := unranked(r)) is not None]
    if left:
        lines.append("not ranked: " + ", ".join(left))
    return lines


def answer(folded: list[dict]) -> list[str]:
    """The comparison's answer: the fastest trial to the recipe's target, against the next, and with --prices the
    cheapest, the same way (the last lines of the report), over like runs (basis())."""
    lines = best_to_target(
        folded, "time_to_target_s", ("fastest", "sooner", "seconds"), "{:.1f} s".format
    ) + best_to_target(folded, "cost_to_target_usd", ("cheapest", "cheaper", "dollars"), "${:.4g}".format)
    ended = [r["trial"] for r in folded if r.get("seconds") and r.get("finished") and r.get("time_to_target_s") is None]
    if lines and ended:  # --seconds stopped them: not a trial that trained on and missed
        lines.append(f"ended by --seconds before the target: {', '.join(ended)} (not ranked on it)")
    return lines


def basis(folded: list[dict]) -> tuple[str | None, str]:
    """The repeats every trial's answer is read from, and how the answer says so: one start kind all the trials
    have at least 2 repeats of (the one with the most; cold on a tie), or else every repeat with its start-up taken
    out (a kind that always starts cold against one in a warm group; one cold and one warm repeat each). ("cold", "")
    where every repeat started cold: the usual case, said by nothing."""
    runs = [r.get("to_target_runs") or [] for r in folded]
    kinds = [{x["start"] for x in trial} for trial in runs if trial]
    if all(k == {"cold"} for k in kinds):
        return "cold", ""

    def fewest(kind):
        return min(sum(x["start"] == kind for x in trial) for trial in runs if trial)

    common = sorted(set.intersection(*kinds)) if kinds else []
    kind = max(common, key=lambda k: (fewest(k), k == "cold"), default=None)
    if kind is not None and fewest(kind) >= 2:
        return kind, f" ({kind} starts)"
    return None, " (start-up taken out: cold and warm repeats compared alike)"


def reached(trial: dict, key: str, start: str | None) -> tuple[list[float], int]:
    """(each repeat's figure where it reached the target, the repeats on this basis): None for start, start-up
    taken out (the figure less the start-up's time, or its cost at the trial's price)."""
    values, repeats = [], 0
    for x in trial.get("to_target_runs") or []:
        if start is not None and x["start"] != start:
            continue
        value = x.get(key)
        if start is None:  # start-up taken out: a repeat without its start-up (or price) cannot be, and is left out
            per_s = 1.0 if key == "time_to_target_s" else (x.get("price_usd_per_hour") or math.nan) / 3600
            if x.get("startup_s") is None or math.isnan(per_s):
                continue
            value = None if value is None else value - x["startup_s"] * per_s
        repeats += 1
        if value is not None:  # None: a miss, counted in the repeats, never ranked on
            values.append(value)
    return values, repeats


def best_to_target(folded: list[dict], key: str, words: tuple[str, str, str], shown) -> list[str]:
    """The trial that reached the recipe's target soonest, or cheapest, against the next one, with the interval
    where both have 2 repeats or more. Ranked first by the share of repeats that reached the target (a repeat that
    missed is a miss: the fastest is the one that reaches it in every repeat, soonest), then by the median of those
    that did."""
    best_word, lead, unit = words
    start, said = basis(folded)
    ranked = []
    for trial in folded:
        values, repeats = reached(trial, key, start)
        if values:
            ranked.append((trial["trial"], values, repeats, statistics.median(values)))
    if not ranked:
        return []
    ranked.sort(key=lambda t: (-len(t[1]) / t[2], t[3]))
    name, values, repeats, median = ranked[0]
    line = f"{best_word} to target{said}: {name}, {shown(median)} (reached in {len(values)} of {repeats} repeat(s))"
    if len(values) < repeats:
        line += " (no trial reached it in every repeat)"
    if len(ranked) > 1:
        after, after_values, after_repeats, after_median = ranked[1]
        missed = f", reached in {len(after_values)} of {after_repeats}" if len(after_values) < after_repeats else ""
        interval = welch_ratio(after_values, values)
        if interval is None:
            line += f"; next {after}, {shown(after_median)}{missed} (no interval: fewer than 2 repeats)"
        else:
            line += (
                f"; {verdict(interval, lead)} {after}, {shown(after_median)}"
                f"{missed} ({ci(interval, unit, len(after_values), len(values))})"
            )
    return [line]


def verdict(interval: tuple[float, float, float], lead: str) -> str:
    """ "1.37x sooner than", or "not distinguishable from" where the 95% interval holds 1."""
    ratio, lo, hi = interval
    return "not distinguishable from" if lo <= 1 <= hi else f"{ratio:.2f}x {lead} than"
