"""One kill, one restart, right after an MLflow outage (issue 81's suspected trigger, at a held point): the soak once
saw a tf:none trial killed once and restarted twice, the first kill after the server's outage. Here a real `mlflow
server` goes away while the warm tf:none group's first trial is held mid-epoch 2 and comes back once the driver has
found it gone; the group's second trial is then held mid-epoch 2 and its worker SIGKILLed there. It must restart
once from its checkpoint: `restarts` 1, one decision in its `failures` tag, naming the killed process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.held_recipe import Gate
from tests.conftest import paced
from tests.e2e.test_idle_group import pid_in, released_to_the_end
from tests.e2e.test_interrupt import user_env, wait_for
from tests.e2e.test_job_submit import free_port
from tests.e2e.test_resume import nothing_left
from tests.e2e.test_tracking_outage import start_server, stop_server

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 1  # tf:none's warm group, both repeats (a restart keeps its controller)
SECONDS = 120

ROOT = Path(__file__).resolve().parents[2]


def test_a_worker_killed_after_a_tracking_outage_restarts_its_trial_once(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # this test's client: fail fast while it is down
    db, artifacts, log, port = tmp_path / "mlflow.db", tmp_path / "artifacts", tmp_path / "server.log", free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(db, artifacts, port, log)
    gate = tmp_path / "gate"
    gate.mkdir()
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "held_recipe.py"),
        "--quick",
        "--compile",
        "off",
        "--trials",
        "tf:none",
        "--repeats",
        "2",
        "--epochs",
        "3",
        "--steps-per-epoch",
        str(paced(200)),
        "--tracking-uri",
        uri,
        "--experiment",
        "kill-after-outage",
    ]
    errors = tmp_path / "driver.err"
    env = {**user_env(tmp_path, "MLFLOW_HTTP_REQUEST_MAX_RETRIES"), "RAYLAB_TEST_GATE": str(gate)}
    driver = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=errors.open("w"), text=True, start_new_session=True
    )
    holds = Gate(gate)
    try:
        wait_for(lambda: pid_in(gate / "held-1"), 480, "the first trial held mid-epoch 2")
        stop_server(server)
        holds.release("held-1")
        wait_for(lambda: "cannot be reached" in errors.read_text(), 300, "the driver to find the server gone")
        server = start_server(db, artifacts, port, log)
        killed = wait_for(lambda: pid_in(gate / "held-2"), 480, "the second trial held mid-epoch 2")
        os.kill(killed, signal.SIGKILL)
        out = released_to_the_end(driver, holds)  # the restarted attempt holds again at its step: it goes on
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(timeout=30)
        stop_server(server)
    err = errors.read_text()
    assert driver.returncode == 0, out[-2000:] + err[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name("kill-after-outage").experiment_id
    first, second = sorted(
        (r for r in client.search_runs([exp]) if r.data.tags.get("raylab.role") == "trial"),
        key=lambda r: r.info.start_time,
    )
    assert first.info.status == second.info.status == "FINISHED"
    assert not first.data.metrics.get("restarts"), first.data.tags.get("failures")
    failures = second.data.tags.get("failures", "")
    assert second.data.metrics["restarts"] == 1 and failures.count("->") == 1, failures
    assert str(killed) in failures and "restarted from the last checkpoint" in failures, failures
    assert str(killed) in second.data.tags["worker_pids"].split(","), second.data.tags["worker_pids"]
    nothing_left(tmp_path)
