"""The answer by throughput: the trials ranked by steady samples/s, only where the verdict supports a figure.

A figure is ranked when its trial finished, its samples/s rests on parity.STEADY_FLOOR_S or more of steady steps,
and nothing else ran beside it over that window (parity.beside); the others are named with why. A comparison whose
settings differ (an UNFAIR verdict for anything but what ran beside) ranks nothing. Pure functions over folded
`raylab compare` rows (raylab/compare/stats.py fold()).
"""

from __future__ import annotations

from raylab.compare import parity

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
    from raylab.compare.stats import rate

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
