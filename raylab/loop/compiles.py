"""A trial's compilations, counted apart: during the warm-up, in evaluation, and any after the warm-up (a training
step whose shapes, types or guards changed, which a steady-state figure must not hide). One watch for every
framework that compiles; each gives it `snapshot() -> (compilations, seconds spent compiling) so far in this
process`, from its own counters (torch_xla's metrics, jax.monitoring, torch.compile's callbacks)."""

from __future__ import annotations

from typing import Callable


class CompileWatch:
    """compile_count_warmup, compile_time_warmup_s, compiles_after_warmup, compile_time_after_warmup_s,
    compile_count_eval, compile_time_eval_s, and the training steps that compiled after the warm-up."""

    def __init__(
        self, snapshot: Callable[[], tuple[int, float]], warmup_steps: int, count: Callable[[], int] | None = None
    ):
        self.snapshot, self.warmup_steps = snapshot, warmup_steps
        self.count = count or (lambda: snapshot()[0])  # a cheap read of the count alone, made every step
        self.steps, self.seen, self.warm, self.eval = 0, self.count(), (0, 0.0), (0, 0.0)
        self.base = snapshot()  # what this process compiled before the trial (a warm process's earlier trials)
        self.late_steps: list[int] = []

    def after_step(self) -> None:
        self.steps += 1
        if self.steps == self.warmup_steps:
            self.warm = self._since_base()
        seen = self.count()
        if seen != self.seen:
            if self.steps > self.warmup_steps:
                self.late_steps.append(self.steps)
            self.seen = seen

    def apart(self, evaluate):
        """evaluate, its compilations counted apart: evaluation compiles its own graphs, not training steps'."""

        def counted(*args):
            before = self.snapshot()
            out = evaluate(*args)
            after = self.snapshot()
            self.seen = self.count()
            self.eval = (self.eval[0] + after[0] - before[0], self.eval[1] + after[1] - before[1])
            return out

        return counted

    def _since_base(self) -> tuple[int, float]:
        now = self.snapshot()
        return now[0] - self.base[0], now[1] - self.base[1]

    def figures(self) -> dict:
        end, ev = self._since_base(), self.eval
        # a trial shorter than its warm-up (a --batch max probe, a few steps): every compilation was the warm-up's
        warm = self.warm if self.steps >= self.warmup_steps else (end[0] - ev[0], end[1] - ev[1])
        return figures(warm, (end[0] - warm[0] - ev[0], end[1] - warm[1] - ev[1]), ev)


def figures(warm: tuple[int, float], late: tuple[int, float], evaluation: tuple[int, float] = (0, 0.0)) -> dict:
    """The compile_* figures of every framework that compiles, from (compilations, seconds) in the warm-up, after it
    and in evaluation: CompileWatch's, and TF's XlaWatch's (raylab/frameworks/tf/compiled.py), which has no compile
    counter to watch and times its compilations from its windows."""
    return {
        "compile_count_warmup": warm[0],
        "compile_time_warmup_s": warm[1],
        "compiles_after_warmup": late[0],
        "compile_time_after_warmup_s": late[1],
        "compile_count_eval": evaluation[0],
        "compile_time_eval_s": evaluation[1],
    }
