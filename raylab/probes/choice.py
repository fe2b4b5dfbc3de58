"""What --compile best found for one (framework, batch per replica, precision, hardware), and how each trial's kind
chooses from it (raylab/probes/race.py races and keeps them).

A trial trains in the candidate it would spend least in: its first step (compilation) plus its other steps at the
candidate's steady step time, over the steps the trial runs; a candidate other than its kind's usual execution
(torch eager, TF's tf.function) wins only by more than the race's measured noise (the windows' spread). A
3-epoch trial does not pay a 20 s compile for a 1% faster step. The choice, every candidate's figures and what
each would have spent are recorded on the trial.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raylab.registry import get_strategy


@dataclass
class Choice:
    """What --compile best found for one (framework, batch, precision)."""

    candidates: dict  # label -> {"step_ms", "first_s", "windows", "spread"}, {"error": why}, or {} (the only one)
    race_s: float  # the race's wall time on the driver, its Ray task's start included (0: none ran)
    source: str  # "raced", "kept on this host since <date>", "its only candidate"
    steps: dict = dataclasses.field(default_factory=dict)  # trial name -> the steps it will run (race.choose)

    def ranked(self) -> list[str]:
        """The candidates that ran, fastest first (the only candidate where there was nothing to measure)."""
        timed = [label for label, got in self.candidates.items() if "step_ms" in got]
        if not timed:
            return [label for label, got in self.candidates.items() if "error" not in got]
        return sorted(timed, key=lambda label: self.candidates[label]["step_ms"])

    def for_kind(self, kind: str, device: str, steps: int | None = None) -> str:
        """The execution a kind trains in, among the candidates it can run: with the trial's `steps`, the one its
        trial spends least in (projected()), and a candidate other than its usual execution only where it wins by
        more than the race's noise (needed()); without, the fastest a step. Its usual one where none ran."""
        strategy = get_strategy(kind)
        own, usual = strategy.candidates(device), strategy.executions["off"]
        ranked = [label for label in self.ranked() if label in own]
        timed = [label for label in ranked if "step_ms" in self.candidates[label]]
        if steps is None or not timed:
            return ranked[0] if ranked else usual
        fastest = min(timed, key=lambda label: self.projected(label, steps))
        if fastest == usual or usual not in timed:
            return fastest
        won = self.projected(usual, steps) / self.projected(fastest, steps)
        return fastest if won > self.needed(usual, fastest) else usual

    def projected(self, label: str, steps: int) -> float:
        """Seconds a trial of `steps` steps spends in a timed candidate: its first step (compilation; a trial whose
        compile cache holds the race's compiles spends less) plus the other steps at its steady step time."""
        got = self.candidates[label]
        return got["first_s"] + (steps - 1) * got["step_ms"] / 1e3

    def needed(self, *labels: str) -> float:
        """The lead a candidate needs over the usual execution: 1 + the larger of their windows' spreads (the
        race's measured noise; a kept answer from before spreads were kept: none)."""
        return 1 + max(self.candidates[label].get("spread", 0.0) for label in labels)

    def margin(self, chosen: str, own: list[str] | None = None, steps: int | None = None) -> float | None:
        """The next candidate's figure over the chosen one's (1.43: it won by 43%), where both ran: with the trial's
        `steps`, the seconds each would spend on them (projected()); else a step's time. Among `own`, the candidates
        the trial's kind can run, where given (tf:mirrored's only one wins against none)."""

        def cost(label):
            got = self.candidates[label]
            return self.projected(label, steps) if steps else got["step_ms"]

        others = sorted(
            cost(label)
            for label, got in self.candidates.items()
            if "step_ms" in got and label != chosen and (own is None or label in own)
        )
        mine = cost(chosen) if "step_ms" in self.candidates.get(chosen, {}) else None
        return others[0] / mine if others and mine else None

    def described(self) -> str:
        """'eager 1.02 ms, inductor 1.46 ms (first step 19.8 s)': every candidate's steady step and first step."""
        parts = []
        for label, got in self.candidates.items():
            if "error" in got:
                parts.append(f"{label} failed: {got['error']}")
            elif "step_ms" in got:
                parts.append(f"{label} {got['step_ms']:.3g} ms (first step {got['first_s']:.1f} s)")
            else:
                parts.append(f"{label} (its only candidate)")
        return "; ".join(parts)

    def params(self, chosen: str, own: list[str] | None = None, steps: int | None = None) -> dict:
        """A trial's MLflow params of the choice; `own`: the candidates its kind can run (the margin is over them);
        `steps`: its steps, for what each candidate would have spent (execution_projected)."""
        margin = self.margin(chosen, own, steps)
        timed = [label for label in (own or self.candidates) if "step_ms" in self.candidates.get(label, {})]
        projected = (
            f"{steps} steps: "
            + ", ".join(f"{label} {self.projected(label, steps):.1f} s" for label in timed)
            + f"; a lead over the usual execution counts past {self.needed(*timed):.2f}x"
            if steps and len(timed) > 1
            else None
        )
        return {
            "execution_choice": "best",
            "execution_candidates": self.described()[:490],
            **({"execution_margin": round(margin, 3)} if margin and margin >= 1 else {}),  # what it won by
            **({"execution_projected": projected[:490]} if projected else {}),
            "race_s": round(self.race_s, 2),
            "race_source": self.source,
        }
