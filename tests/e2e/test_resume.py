"""The driver SIGKILLed mid-matrix (a crash, a lost head node), then `--resume last`: the finished trial is not
run again, the interrupted one goes on from its last checkpoint, all under the first invocation's parent run.
The kill lands while the second trial is held mid-epoch by its own model (tests/held_recipe.py), whatever
this machine's speed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import paced
from tests.e2e.test_interrupt import sqlite_store, user_env, wait_for

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 2  # the first driver's warm group (both repeats), the resumed trial
# 42-60 s where the killed driver's cluster is gone at once; 87-95 s in about half the runs (2026-12-07, the
# 2-core VM, the default tier and alone), where its dashboard and runtime-env agents, their raylet dead, first try to
# report that death to the dead GCS and exit about 60 s after the kill (ray/_private/process_watcher.py)
SECONDS = 95

ROOT = Path(__file__).resolve().parents[2]
STEPS = paced(200)  # per epoch: the trials hold at 1.5 x this


def processes_of(home: Path) -> list[str]:
    """Processes started by that driver (Ray's head processes, workers, actors): they carry its HOME."""
    mark = f"HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80])
        except OSError:
            continue
    return found


def nothing_left(home: Path, timeout: float = 150) -> None:
    """Waits for that driver's processes to exit (a dead raylet's workers notice within about a minute)."""
    deadline = time.monotonic() + timeout
    while processes_of(home) and time.monotonic() < deadline:
        time.sleep(2)
    assert not processes_of(home), f"left after {timeout:.0f} s: {processes_of(home)}"


def test_driver_killed_mid_matrix_then_resume_last_finishes_every_trial_once(tmp_path):
    env = user_env(tmp_path)
    uri, client = sqlite_store(tmp_path)
    recipe = [sys.executable, str(ROOT / "tests" / "held_recipe.py")]
    where = ["--tracking-uri", uri, "--experiment", "crashed"]
    gate = tmp_path / "gate"
    gate.mkdir()
    # Two trials (torch:none's two repeats, in one warm group), each held mid-epoch 2 by its model
    # (tests/held_recipe.py): the first is let go on and finishes; the driver is SIGKILLed while the second
    # is held, past its first epoch's checkpoint. No race with the machine's speed: the second cannot end first.
    first = subprocess.Popen(
        [
            *recipe,
            "--quick",
            "--compile",
            "off",
            "--trials",
            "torch:none",
            "--repeats",
            "2",
            "--epochs",
            "4",
            "--steps-per-epoch",
            str(STEPS),
            "--checkpoint-every",
            "0",
            *where,
        ],
        cwd=tmp_path,
        env={**env, "RAYLAB_TEST_GATE": str(gate)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (gate / "held-1").exists(), 480, "the first trial held mid-epoch 2")
        (gate / "release-1").touch()
        wait_for(lambda: (gate / "held-2").exists(), 480, "the second trial held mid-epoch 2")

        def second_trial_past_epoch_1():  # the driver logs epochs every 2 s: the held trial's first is on its way
            exp = client.get_experiment_by_name("crashed")
            runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("raylab.role") == "trial"]
            second = [r for r in runs if r.info.status == "RUNNING"]
            return second and client.get_metric_history(second[0].info.run_id, "val_accuracy")

        wait_for(second_trial_past_epoch_1, 120, "the held trial's first epoch in MLflow")
        first.kill()  # SIGKILL to the driver alone: nothing of raylab's runs after it
        first.communicate(timeout=60)
        # The driver is MLflow's only writer: what it left is what the store holds now. (Its in-process cluster's
        # raylet, GCS and workers go with it, within about a minute: checked at the end, not waited for here.)
        exp = client.get_experiment_by_name("crashed").experiment_id
        before = {r.info.run_id: r for r in client.search_runs([exp])}
        assert sorted(r.info.status for r in before.values()) == ["FINISHED", "RUNNING", "RUNNING"]

        resumed = subprocess.run(
            [*recipe, "--resume", "last", *where], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )  # no gate: nothing is held
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
    after = {r.info.run_id: r for r in client.search_runs([exp])}
    assert after.keys() == before.keys()  # one parent, the same two trial runs: nothing ran twice
    assert all(r.info.status == "FINISHED" for r in after.values())
    trials = [r for r in after.values() if r.data.tags.get("raylab.role") == "trial"]
    assert len(trials) == 2
    for run in trials:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert sorted(steps) == [1, 2, 3, 4], (run.info.run_name, steps)
    # the two repeats ran in one warm group: the second in the processes the first started (docs/trials.md)
    a, b = sorted(trials, key=lambda r: int(r.data.params["group_index"]))
    assert [(r.data.params["start"], r.data.params["group_index"]) for r in (a, b)] == [("cold", "0"), ("warm", "1")]
    assert before[a.info.run_id].data.tags["train_run"] == before[b.info.run_id].data.tags["train_run"], (
        before[a.info.run_id].data.tags,
        before[b.info.run_id].data.tags,
    )
    done_before = [r for r in trials if before[r.info.run_id].info.status == "FINISHED"]
    assert len(done_before) == 1 and done_before[0].info.end_time == before[done_before[0].info.run_id].info.end_time
    resumed_trial = next(r for r in trials if r not in done_before)
    # it went on from its first epoch's checkpoint (200 steps), where it was held (step 300) being past it
    assert resumed_trial.data.metrics.get("resumed_from_step") == STEPS, resumed_trial.data.metrics
    nothing_left(tmp_path)  # the killed driver's cluster and the resumed one's: every process that HOME started
