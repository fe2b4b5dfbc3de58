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


def summarize_windows(windows: list[tuple[float, int]], global_batch: int) -> dict:
    """Steady-state figures from windows of (seconds, steps), each timed from one host read to the next.

    samples/s is total steady samples over total steady time. The step-time percentiles are over the
    windows' mean step times: per-step figures when every window is one step (--step-latency).
    """
    if not windows:
        raise ValueError("no steady-state windows")
    secs = np.array([w[0] for w in windows], dtype=float)
    steps = np.array([w[1] for w in windows], dtype=float)
    per_step = secs / steps
    return {
        "step_time_p50_ms": float(np.percentile(per_step, 50) * 1e3),
        "step_time_p90_ms": float(np.percentile(per_step, 90) * 1e3),
        "step_time_mean_ms": float(secs.sum() / steps.sum() * 1e3),
        "steady_steps": int(steps.sum()),
        "steady_s": float(secs.sum()),  # what samples/s rests on (raylab/compare/parity.py STEADY_FLOOR_S)
        "samples_per_sec": float(global_batch * steps.sum() / secs.sum()),
    }


class Chrono:
    """Times the training windows of one worker: k steps between one host read and the next.

    A window's time runs from its first step's dispatch to the read that ends it, so it holds the
    device's whole work for those steps whatever the framework queued ahead. `trial_start` is the
    driver's wall clock when the trial began, so startup covers Ray workers, imports, process
    groups and the data hand-off.
    """

    def __init__(self, trial_start: float, warmup: int):
        self.trial_start = trial_start
        self.warmup = max(1, warmup)
        self.windows: list[tuple[float, int]] = []  # (seconds, steps)
        self.ends: list[float] = []  # each window's end, wall clock (bench/studies/paired.py lines runs up by it)
        self.startup_s: float | None = None
        self.carried: dict | None = None  # what earlier attempts of a restarted trial timed (state())
        self._t0 = 0.0

    def start(self) -> None:
        if self.startup_s is None:
            self.startup_s = time.time() - self.trial_start
        self._t0 = time.perf_counter()

    def stop(self, steps: int = 1) -> float:
        dt = time.perf_counter() - self._t0
        self.windows.append((dt, steps))
        self.ends.append(time.time())
        return dt

    def elapsed(self) -> float:
        """Seconds since the trial started (the x axis of time-to-accuracy)."""
        return time.time() - self.trial_start

    def first_steady(self) -> int | None:
        done = 0
        for i, (_, steps) in enumerate(self.windows):
            if done >= self.warmup:
                return i
            done += steps
        return None

    def steady_s(self) -> float:
        """Seconds of steady windows so far, an earlier attempt's (carried) included: what --seconds counts."""
        first = self.first_steady()
        own = sum(seconds for seconds, _ in self.windows[first:]) if first is not None else 0.0
        return own + sum(seconds for seconds, _ in (self.carried or {}).get("steady", []))

    def state(self) -> dict:
        """What a checkpoint keeps of this trial's timing: its first attempt's startup and first step, and
        every steady window so far (a restarted attempt's own warm-up is left out, as the first's was)."""
        first = self.first_steady()
        own = self.windows[first:] if first is not None else []
        if self.carried:
            return {**self.carried, "steady": self.carried["steady"] + [list(w) for w in own]}
        return {
            "startup_s": self.startup_s,
            "first_step_s": self.windows[0][0] / self.windows[0][1],
            "warmup_steps": sum(s for _, s in self.windows[:first])
            if first is not None
            else sum(s for _, s in self.windows),
            "steady": [list(w) for w in own],
        }

    def summary(self, global_batch: int) -> dict:
        """Windows that start after the warm-up steps are steady; a run too short for that keeps its last.
        After a restart, the steady windows of earlier attempts (carried) count too, and the startup and first
        step are the first attempt's: recovery is recorded apart, never in the throughput."""
        first_steady = self.first_steady()
        if self.carried:
            steady = [tuple(w) for w in self.carried["steady"]] + self.windows[first_steady or len(self.windows) :]
            return {
                "startup_s": self.carried["startup_s"],
                "first_step_s": self.carried["first_step_s"],
                "warmup_steps": self.carried["warmup_steps"],
                **summarize_windows(steady or self.windows[-1:], global_batch),
            }
        if first_steady is None:
            first_steady = max(1, len(self.windows) - 1)
        if first_steady >= len(self.windows):
            raise ValueError(
                f"no steady-state steps: {sum(s for _, s in self.windows)} steps, {self.warmup} of warm-up"
            )
        warmup = sum(s for _, s in self.windows[:first_steady])
        return {
            "startup_s": self.startup_s,
            "first_step_s": self.windows[0][0] / self.windows[0][1],
            "warmup_steps": warmup,
            **summarize_windows(self.windows[first_steady:], global_batch),
        }


def process_start() -> float | None:
    """When this process started (wall clock), or None where that cannot be read."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - a phase split, not a figure anything depends on
        return None


class Phases:
    """Where a worker's startup went, phase by phase, up to its first step.

    Created first thing in a worker loop: `process` is the trial start up to this worker process's
    start (Ray Train's controller starting and asking Ray for the worker), `workers` from there to the
    worker loop (the process's Ray Train set-up, the backend's TF_CONFIG / process group / PJRT
    set-up; imports started at the process's start overlap it, raylab/frameworks/prewarm.py). Backends mark
    `imports`, `setup` (strategy, devices), `data` (object store to tensors) and `model`; what is
    left before the first step is `other`. In a warm worker group's process (started before the trial) `process` is
    0 and `workers` runs from the trial's start to its loop.
    """

    NAMES = ("process", "workers", "imports", "setup", "data", "model", "other")

    def __init__(self, trial_start: float):
        self.times: dict[str, float] = {}
        self._last = trial_start
        born = process_start()
        if born is not None and trial_start <= born <= time.time():
            self.times["process"], self._last = born - trial_start, born
        elif born is not None and born < trial_start:  # a warm worker group's process: already there
            self.times["process"] = 0.0
        self.mark("workers")

    def mark(self, name: str) -> None:
        now = time.time()
        self.times[name] = self.times.get(name, 0.0) + now - self._last
        self._last = now

    def summary(self, startup_s: float) -> dict:
        known = sum(self.times.values())
        return {f"startup_{k}_s": v for k, v in {**self.times, "other": max(0.0, startup_s - known)}.items()}


def side_by_side(
    runs: dict,
    budget_s: float = 3.0,
    window_s: float = 0.5,
    max_window: int = 32,
    rounds: int = 3,
    block_s: float = 0.3,
) -> dict:
    """Steady step times of several ways of running one step, measured side by side (--compile best's race).

    `runs`: label -> (run(k): k steps then their one host read, seconds its first steps took). Each run's window
    is a trial's (`max_window` steps between host reads: a shorter one would time a call's overhead with the steps)
    unless that takes over `window_s`, then as many steps as fit in it (at least one), estimated from 2 steps. Each
    run then warms up for a block, untimed (TF's first second of a new graph ran 2-3x slower here);
    then the runs take turns, a block of about `block_s` of windows each (a turn per window evicted each other's
    weights from the caches: 15% slower a step), until each has had `rounds` blocks and the turns have spent
    `budget_s` (a slow step, the ResNet-UNet's 1 s, stops at `rounds` windows). Turns, so that the machine's drift
    falls on every run alike. Returns label -> {"step_ms": median ms a step over the windows, "first_s": its first
    steps, "windows": how many were timed, "spread": their noise (spread())}.
    """
    sizes = {}
    for label, (run, _) in runs.items():
        per = []
        for _ in range(2):  # the faster of two: a first call can be slow, and a short window's call overhead counts
            t0 = time.perf_counter()
            run(2)
            per.append((time.perf_counter() - t0) / 2)
        sizes[label] = max(1, min(max_window, int(window_s / max(min(per), 1e-6))))
    times: dict = {label: [] for label in runs}

    def block(label: str, keep: bool) -> None:
        run, t_block = runs[label][0], time.perf_counter()
        while True:
            t0 = time.perf_counter()
            run(sizes[label])
            if keep:
                times[label].append((time.perf_counter() - t0) / sizes[label])
            if time.perf_counter() - t_block >= block_s:
                return

    for label in runs:
        block(label, keep=False)
    start, turns = time.perf_counter(), 0
    while turns < rounds or time.perf_counter() - start < budget_s:
        for label in runs:
            block(label, keep=True)
        turns += 1
    return {
        label: {
            "step_ms": float(np.median(times[label]) * 1e3),
            "first_s": runs[label][1],
            "windows": len(times[label]),
            "spread": spread(times[label]),
        }
        for label in runs
    }


def spread(times: list[float]) -> float:
    """The windows' noise: their interquartile range over their median (0.04: the middle half within 4%)."""
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return float((q3 - q1) / median) if median > 0 else 0.0
