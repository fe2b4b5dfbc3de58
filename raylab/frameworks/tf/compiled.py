"""XLA in the TF trials (--compile on): each replica's training step compiled with `jit_compile=True`, as Keras
compiles its train step when asked; the window's loop around it stays a tf.function, since the input pipeline's
ops have no XLA kernels. Only tf:none offers it on a CPU: under MirroredStrategy over logical CPUs XLA cannot reach
the other replicas' variables ("Trying to access resource ... located in device CPU:1 from device CPU:0", XLA's
known issue with variables on another device), tf:mwms was not shown to run its collectives inside XLA here, and
tf:ps runs tf_keras' functions its chief dispatches (raylab/frameworks/tf/ps.py), no step of raylab's to compile.
TPUStrategy compiles with XLA whatever is asked.

TF exposes no XLA compile timer to Python (its /tensorflow/core/xla_compilation_time_usecs counter is C++ only),
so XlaWatch counts compilations as traces of the compiled step (a new input signature is a new XLA program) and
times them as the compiling windows' time beyond the steady steps' share of it: tracing included.
"""

from __future__ import annotations

import statistics
import time

from raylab.loop import compiles


def replica_step(tf, step, execution: str):
    """step(xb, yb) of one replica, compiled by XLA where `execution` is "xla"."""
    return tf.function(step, jit_compile=True) if execution == "xla" else step


class XlaWatch:
    """Wraps train(k): each window timed (TF's eager calls return when their work is done), with the compiled
    step's trace count after it; figures() gives the compile_* figures the other frameworks' CompileWatch gives
    (raylab/loop/compiles.py `figures`)."""

    def __init__(self, step, warmup_steps: int):
        self.step, self.warmup_steps = step, warmup_steps
        self.windows: list[tuple[float, int, int, int]] = []  # (seconds, steps, steps before it, new traces)
        self.steps = 0

    def timed(self, train):
        def run(k: int):
            before, start = self.traces(), time.perf_counter()
            out = train(k)
            self.windows.append((time.perf_counter() - start, k, self.steps, self.traces() - before))
            self.steps += k
            return out

        return run

    def traces(self) -> int:
        return self.step.experimental_get_tracing_count()

    def figures(self) -> dict:
        steady = [s / k for s, k, _, new in self.windows if not new and k]
        per_step = statistics.median(steady) if steady else 0.0
        warm = [(s - k * per_step, new) for s, k, at, new in self.windows if new and at < self.warmup_steps]
        late = [(s - k * per_step, new) for s, k, at, new in self.windows if new and at >= self.warmup_steps]
        return compiles.figures(
            (sum(n for _, n in warm), sum(max(t, 0) for t, _ in warm)),
            (sum(n for _, n in late), sum(max(t, 0) for t, _ in late)),
        )
