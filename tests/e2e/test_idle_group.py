"""A warm group that loses its worker process while idle, between two trials of one invocation: Ray Train does not
restart it (no trial is running to go on with), it ends and leaves nothing running, and the next trial of its kind
starts cold in a new group, recording why. The kill lands while another group's trial is held mid-epoch by its own
model (tests/held_recipe.py), so the idle group is idle then, whatever this machine's speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.held_recipe import Gate
from tests.conftest import paced
from tests.e2e.test_interrupt import sqlite_store, user_env, wait_for
from tests.e2e.test_resume import nothing_left, processes_of

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 3  # torch:none's group, torch:ddp x2's group, torch:none's new group after the loss
SECONDS = 85

ROOT = Path(__file__).resolve().parents[2]


def controllers(home: Path) -> int:
    """Ray Train runs alive of that driver (one controller each: a warm group's is its run)."""
    return sum(p.startswith("ray::TrainController") for p in processes_of(home))


def pid_in(held: Path) -> int | None:
    text = held.read_text().strip() if held.exists() else ""
    return int(text) if text else None


def released_to_the_end(driver: subprocess.Popen, holds: Gate) -> str:
    """Lets every hold go on as it comes until the driver exits; its output."""
    while driver.poll() is None:
        holds.release_all()
        try:
            driver.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            pass
    return driver.communicate(timeout=60)[0]


def test_an_idle_warm_group_that_loses_its_process_ends_and_its_next_trial_starts_cold(tmp_path):
    env = user_env(tmp_path)
    uri, client = sqlite_store(tmp_path)
    gate = tmp_path / "gate"
    gate.mkdir()
    # A B B A: torch:none (A) and torch:ddp x2 (B) in warm groups of their own; each trial holds mid-epoch 2.
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "held_recipe.py"),
        "--quick",
        "--compile",
        "off",
        "--trials",
        "torch:none,torch:ddp x2",
        "--repeats",
        "2",
        "--epochs",
        "2",
        "--steps-per-epoch",
        str(paced(40)),
        "--tracking-uri",
        uri,
        "--experiment",
        "idle",
    ]
    driver = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env={**env, "RAYLAB_TEST_GATE": str(gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    holds = Gate(gate)
    try:
        a = wait_for(lambda: pid_in(gate / "held-1"), 480, "A's first trial held")
        holds.release("held-1")
        wait_for(lambda: pid_in(gate / "held-2") and pid_in(gate / "held-3"), 480, "B's first trial held (2 ranks)")
        assert controllers(tmp_path) == 2  # A's group, idle; B's, running its first trial
        os.kill(a, signal.SIGKILL)  # A's group's only worker process, idle between A's trials
        wait_for(lambda: controllers(tmp_path) == 1, 60, "A's group to end (not restarted)")
        out = released_to_the_end(driver, holds)  # every later hold goes on at once
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
    assert driver.returncode == 0, out[-3000:]
    exp = client.get_experiment_by_name("idle").experiment_id
    trials = sorted(
        (r for r in client.search_runs([exp]) if r.data.tags.get("raylab.role") == "trial"),
        key=lambda r: r.info.start_time,
    )
    assert [r.info.run_name for r in trials] == ["torch:none x1", "torch:ddp x2", "torch:ddp x2", "torch:none x1"]
    assert all(r.info.status == "FINISHED" and not r.data.metrics.get("restarts") for r in trials)
    starts = [(r.data.params.get("start"), r.data.params.get("group_index")) for r in trials]
    assert starts == [("cold", "0"), ("cold", "0"), ("warm", "1"), ("cold", "0")], starts
    why = trials[3].data.tags.get("cold_reason", "")
    assert "lost a worker process while idle" in why and "ActorDiedError" in why, why
    nothing_left(tmp_path)
