"""JAX's compilations so far in this process, for raylab/loop/compiles.py's CompileWatch: from jax.monitoring's
events, each compilation one `backend_compile_duration` event, its time the tracing, lowering and compiling
events'."""

from __future__ import annotations

import threading

COMPILE = "/jax/core/compile/backend_compile_duration"
STAGES = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration", COMPILE)


class Compilations:
    """snapshot() -> (compilations, seconds) since it was made, counted from jax.monitoring's events."""

    def __init__(self):
        import jax.monitoring

        self.count, self.seconds, self._lock = 0, 0.0, threading.Lock()
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event: str, duration: float, **_) -> None:
        if event in STAGES:
            with self._lock:
                self.seconds += duration
                self.count += event == COMPILE

    def snapshot(self) -> tuple[int, float]:
        with self._lock:
            return self.count, self.seconds


def watch(warmup_steps: int):
    """A CompileWatch over this process's jax compilations."""
    from raylab.loop.compiles import CompileWatch

    return CompileWatch(Compilations().snapshot, warmup_steps)
