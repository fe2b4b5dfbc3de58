"""`--profile`: one steady window of rank 0, profiled in the framework's own format, with a summary to read.

The loop (raylab/loop/run.py) profiles the first window after the warm-up on rank 0 (cfg.window steps: one
TF call of k steps, k torch steps, k XLA graphs), inside its framework's profiler context (StepContext.profile,
`capture` in raylab/frameworks/<name>/profile.py): each writes its framework's own trace format (a Chrome trace, an XSpace) and fills a `Captured` with its
operations' self times.

Beside them, `profile_summary.txt`: the window (steps, seconds), the share the loop measured waiting for
input, the operations' self time grouped as communication (all-reduce, broadcast, collectives) and compute,
and the top operations by self time. Op times on a CPU overlap (threads) and, under DDP, communication
overlaps the backward pass: the shares are of the summed op time, not of the wall clock.

Nothing of this runs unless --profile is given: the loop then calls train(k) as it always does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SUMMARY = "profile_summary.txt"
TOP = 15
COMMUNICATION = re.compile(r"all[-_]?reduce|all[-_]?gather|reduce[-_]scatter|broadcast|collective|gloo|nccl|"
                           r"c10d|send|recv", re.I)


@dataclass
class Captured:
    """What a framework's profiler found: its operations, (name, self seconds, calls), and what it wrote."""

    tool: str
    ops: list[tuple[str, float, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- what a person reads -------------------------------------------------------------------------------------

def summary(trial: str, found: Captured, steps: tuple[int, int], seconds: float, input_wait: float | None) -> str:
    """profile_summary.txt: the window, where its time went, the top operations by self time."""
    first, last = steps
    ops = sorted((o for o in found.ops if o[1] > 0), key=lambda o: -o[1])
    total = sum(s for _, s, _ in ops)
    comm = sum(s for name, s, _ in ops if COMMUNICATION.search(name))
    lines = [f"raylab profile: {trial}, rank 0, steps {first}-{last} ({last - first + 1} steps, one steady window), "
             f"{seconds:.3f} s of wall clock; {found.tool}",
             "The profiler's own cost is in these seconds: this window's step times are longer than the others'.", ""]
    if input_wait is not None:
        lines.append(f"input wait (the loop's measure): {input_wait:.3f} s, {_share(input_wait, seconds)} of the window")
    if total:
        lines += [f"operations' self time: {total:.3f} s (summed over threads{' and devices' if 'CUDA' in found.tool else ''})",
                  f"  communication (all-reduce, broadcast, collectives): {comm:.3f} s, {_share(comm, total)}",
                  f"  compute (every other operation): {total - comm:.3f} s, {_share(total - comm, total)}"]
    lines += [*found.notes, "", f"top {min(TOP, len(ops))} operations by self time:",
              f"{'operation':<60} {'self s':>10} {'share':>7} {'calls':>7}"]
    lines += [f"{name[:60]:<60} {s:>10.4f} {_share(s, total):>7} {n:>7}" for name, s, n in ops[:TOP]]
    return "\n".join(lines) + "\n"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def files(logdir: Path) -> dict[str, bytes]:
    """Every file the window's profile wrote, by its path under logdir (what the driver logs as artifacts)."""
    return {str(p.relative_to(logdir)): p.read_bytes() for p in sorted(logdir.rglob("*")) if p.is_file()}
