"""The marks a row of the table carries where its figure needs a word: too short to time (~), measured beside
other work (^), input-bound (!); each with its column or note. Pure functions over `raylab compare` rows."""

from __future__ import annotations

from raylab.compare import parity

INPUT_BOUND = 0.2  # a trial whose steps waited for input this share of their time or more is flagged input-bound


def steady_column(columns: list, rows: list[dict]) -> tuple[list, list[dict], list[str]]:
    """(columns, rows, notes) with "steady s" where some trial's samples/s rests on too few seconds of steps to
    mean something (parity.too_short): each trial's seconds, the short ones marked ~, and the note saying why."""
    short = dict(parity.too_short(rows))
    if not short:
        return columns, rows, []
    rows = [
        {
            **r,
            "steady_shown": None
            if r.get("steady_s") is None
            else f"{r['steady_s']:.1f}" + (" ~" if r["trial"] in short else ""),
        }
        for r in rows
    ]
    return (
        columns + [("steady_shown", "steady s", "{}")],
        rows,
        [
            f"~ too short to time: under {parity.STEADY_FLOOR_S:g} s of steady steps, its samples/s is not a figure "
            "to compare (one pause moves it by a tenth or more); give it more steps (--epochs, --steps-per-epoch) or "
            "--seconds 5"
        ],
    )


def crowded(row: dict) -> bool:
    """Measured beside more other work than parity.BESIDE_MAX_CORES (folded: its repeats' median)."""
    return bool(parity.beside([row]))


def shown_beside(row: dict) -> str | None:
    """Cores of other work beside its steady window, with what the hypervisor stole: '0.04', '0.93 ^', '0.10+0.30s'."""
    other, stolen = row.get("beside_cores"), row.get("steal_cores")
    if other is None:
        return None
    text = f"{other:.2f}" + (f"+{stolen:.2f}s" if stolen and stolen >= 0.005 else "")
    return text + (" ^" if crowded(row) else "")


def input_bound(row: dict) -> bool:
    return (row.get("input_wait_share") or 0) >= INPUT_BOUND


def beside_column(columns: list, rows: list[dict]) -> tuple[list, list[dict], list[str]]:
    """(columns, rows, notes) with "beside" where trials recorded what ran beside their steady window
    (raylab/loop/beside.py), and the note for those measured beside too much of it."""
    if not any(r.get("beside_cores") is not None for r in rows):
        return columns, rows, []
    rows = [{**r, "beside_shown": shown_beside(r)} for r in rows]
    notes = (
        [
            f"^ measured beside other work: over {parity.BESIDE_MAX_CORES:g} of a core of processes neither its own "
            "nor Ray's (or stolen by the hypervisor) during its steady window, so its figure is not the trial's alone "
            "(beside = cores of other work, +N s = stolen); rerun it on a quiet node"
        ]
        if any(map(crowded, rows))
        else []
    )
    return columns + [("beside_shown", "beside", "{}")], rows, notes
