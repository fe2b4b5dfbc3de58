"""raylab.timing: steady-state summaries and the per-worker Chrono."""

from __future__ import annotations

import time

import pytest

from raylab.loop import windows
from raylab.timing import Chrono, summarize, summarize_windows


def test_summarize_excludes_warmup_and_uses_total_time():
    """Warm-up steps are left out; p50/p90 interpolate; samples/s is batch * steps / total steady time."""
    s = summarize([9.0, 9.0, 0.1, 0.2, 0.3, 0.4, 0.5], warmup=2, global_batch=30)
    assert s["steady_steps"] == 5
    assert s["step_time_p50_ms"] == pytest.approx(300.0)
    assert s["step_time_p90_ms"] == pytest.approx(460.0)  # 0.4 + 0.6 * (0.5 - 0.4)
    assert s["step_time_mean_ms"] == pytest.approx(300.0)
    assert s["samples_per_sec"] == pytest.approx(30 * 5 / 1.5)


def test_summarize_one_slow_step_costs_what_it_cost():
    """A slow step moves samples/s (total time) even though the median ignores it."""
    s = summarize([0.01] * 19 + [0.21], warmup=0, global_batch=10)
    assert s["step_time_p50_ms"] == pytest.approx(10.0)
    assert s["samples_per_sec"] == pytest.approx(10 * 20 / 0.4)


@pytest.mark.parametrize("steps", [[], [0.1, 0.2]])
def test_summarize_without_steady_steps_raises(steps):
    """No steps left after warm-up is an error, not a division by zero."""
    with pytest.raises(ValueError, match="no steady-state steps"):
        summarize(steps, warmup=2, global_batch=32)


def test_chrono_startup_from_trial_start_and_first_step():
    """startup_s runs from the driver's trial start to the first step; first_step_s is step one's time."""
    c = Chrono(trial_start=time.time() - 5.0, warmup=1)
    c.start()
    time.sleep(0.05)
    first = c.stop(1)
    for _ in range(3):
        c.start()
        c.stop(4)
    s = c.summary(global_batch=8)
    assert 5.0 <= s["startup_s"] < 6.0  # not reset by later start() calls
    assert s["first_step_s"] == first >= 0.05
    assert s["warmup_steps"] == 1 and s["steady_steps"] == 12
    assert s["step_time_p90_ms"] < 50  # the slow first step is warm-up
    assert 5.0 <= c.elapsed() < 10.0


def test_chrono_warmup_clamped():
    """Warm-up is at least 1 step but never swallows every window of a short run."""
    assert Chrono(time.time(), warmup=0).warmup == 1
    c = Chrono(time.time(), warmup=20)
    for k in (1, 2):
        c.start()
        c.stop(k)
    s = c.summary(global_batch=4)
    assert s["warmup_steps"] == 1 and s["steady_steps"] == 2


def test_summarize_windows_total_time_and_per_step_percentiles():
    """Windows of (seconds, steps): samples/s over total steady time; percentiles of each window's mean step."""
    s = summarize_windows([(0.32, 32), (0.64, 32), (0.1, 10)], global_batch=8)
    assert s["steady_steps"] == 74
    assert s["samples_per_sec"] == pytest.approx(8 * 74 / 1.06)
    assert s["step_time_p50_ms"] == pytest.approx(10.0)
    assert s["step_time_mean_ms"] == pytest.approx(1060 / 74)


@pytest.mark.parametrize(
    "steps,window,warmup,done,expected",
    [
        (100, 32, 20, 0, [1, 19, 32, 32, 16]),  # the first step alone, warm-up ends on a window's edge
        (100, 32, 20, 100, [32, 32, 32, 4]),  # a later epoch: whole windows, the last cut at the epoch's end
        (5, 32, 20, 0, [1, 4]),
        (3, 1, 2, 0, [1, 1, 1]),  # --step-latency: a read after every step
    ],
)
def test_windows_per_epoch(steps, window, warmup, done, expected):
    assert windows(steps, window, warmup, done) == expected
    assert sum(expected) == steps
