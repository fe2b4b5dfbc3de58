"""JAX's compilations during a trial, counted apart: warm-up, evaluation, and any after the warm-up (a training
step whose shapes or types changed, which a steady-state figure must not hide). From jax.monitoring's events:
each compilation is one `backend_compile_duration` event, its time the tracing, lowering and compiling events'."""

from __future__ import annotations

import threading

COMPILE = "/jax/core/compile/backend_compile_duration"
STAGES = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration", COMPILE)


class CompileWatch:
    """The same figures as the xla trials record (compile_count_warmup, compiles_after_warmup, ...)."""

    def __init__(self, warmup_steps: int):
        import jax.monitoring

        self.warmup_steps, self.steps = warmup_steps, 0
        self.count, self.seconds, self._lock = 0, 0.0, threading.Lock()
        self.warm, self.eval, self.late_steps, self._seen = (0, 0.0), (0, 0.0), [], 0
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event: str, duration: float, **_) -> None:
        if event in STAGES:
            with self._lock:
                self.seconds += duration
                self.count += event == COMPILE

    def snapshot(self) -> tuple[int, float]:
        with self._lock:
            return self.count, self.seconds

    def after_step(self) -> None:
        self.steps += 1
        if self.steps == self.warmup_steps:
            self.warm = self.snapshot()
        if self.count != self._seen:
            if self.steps > self.warmup_steps:
                self.late_steps.append(self.steps)
            self._seen = self.count

    def apart(self, evaluate):
        """evaluate, its compilations counted apart: evaluation compiles its own functions."""

        def counted(*args):
            before = self.snapshot()
            out = evaluate(*args)
            after = self.snapshot()
            self._seen = after[0]
            self.eval = (self.eval[0] + after[0] - before[0], self.eval[1] + after[1] - before[1])
            return out

        return counted

    def figures(self) -> dict:
        end, ev = self.snapshot(), self.eval
        # a trial shorter than its warm-up (a --batch max probe, a few steps): every compilation was the warm-up's
        warm = self.warm if self.steps >= self.warmup_steps else (end[0] - ev[0], end[1] - ev[1])
        return {"compile_count_warmup": warm[0], "compile_time_warmup_s": warm[1],
                "compiles_after_warmup": end[0] - warm[0] - ev[0],
                "compile_time_after_warmup_s": end[1] - warm[1] - ev[1],
                "compile_count_eval": ev[0], "compile_time_eval_s": ev[1]}
