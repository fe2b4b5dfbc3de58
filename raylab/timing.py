"""Phase timing shared by every backend: startup, first step, warm-up, steady state.

Names are the same for every framework so trials line up in MLflow and `raylab compare`.
"""

from __future__ import annotations

import time

import numpy as np


def summarize(step_times: list[float], warmup: int, global_batch: int) -> dict:
    """Steady-state figures from per-step durations (seconds), leaving out the warm-up steps.

    samples/s is total steady samples over total steady time, not batch / median, so one
    slow step in twenty still costs what it cost.
    """
    steady = np.asarray(step_times[warmup:], dtype=float)
    if steady.size == 0:
        raise ValueError(f"no steady-state steps: {len(step_times)} steps, {warmup} of warm-up")
    return {
        "step_time_p50_ms": float(np.percentile(steady, 50) * 1e3),
        "step_time_p90_ms": float(np.percentile(steady, 90) * 1e3),
        "step_time_mean_ms": float(steady.mean() * 1e3),
        "steady_steps": int(steady.size),
        "samples_per_sec": float(global_batch * steady.size / steady.sum()),
    }


class Chrono:
    """Times the training steps of one worker.

    `trial_start` is the driver's wall clock when the trial began, so startup covers Ray
    workers, imports, process groups and the data hand-off.
    """

    def __init__(self, trial_start: float, warmup: int):
        self.trial_start = trial_start
        self.warmup = max(1, warmup)
        self.step_times: list[float] = []
        self.startup_s: float | None = None
        self._t0 = 0.0

    def start(self) -> None:
        if self.startup_s is None:
            self.startup_s = time.time() - self.trial_start
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        dt = time.perf_counter() - self._t0
        self.step_times.append(dt)
        return dt

    def elapsed(self) -> float:
        """Seconds since the trial started (the x axis of time-to-accuracy)."""
        return time.time() - self.trial_start

    def summary(self, global_batch: int) -> dict:
        warmup = min(self.warmup, len(self.step_times) - 1)
        return {
            "startup_s": self.startup_s,
            "first_step_s": self.step_times[0],
            "warmup_steps": warmup,
            **summarize(self.step_times, warmup, global_batch),
        }


class Phases:
    """Where a worker's startup went, phase by phase, up to its first step.

    Created first thing in a worker loop: `workers` is the trial start up to there (Ray starting
    the worker group, the backend's TF_CONFIG / process group / PJRT set-up). Backends mark
    `imports`, `setup` (strategy, devices), `data` (object store to tensors) and `model`; what is
    left before the first step is `other`.
    """

    NAMES = ("workers", "imports", "setup", "data", "model", "other")

    def __init__(self, trial_start: float):
        self.times: dict[str, float] = {}
        self._last = trial_start
        self.mark("workers")

    def mark(self, name: str) -> None:
        now = time.time()
        self.times[name] = self.times.get(name, 0.0) + now - self._last
        self._last = now

    def summary(self, startup_s: float) -> dict:
        known = sum(self.times.values())
        return {f"startup_{k}_s": v for k, v in {**self.times, "other": max(0.0, startup_s - known)}.items()}
