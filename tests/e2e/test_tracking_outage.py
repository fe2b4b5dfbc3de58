"""A real `mlflow server` goes away mid-trial and comes back: nothing the run wrote is lost, nothing stays RUNNING.

The outage lasts RAYLAB_TEST_OUTAGE_S seconds (default 30: past MLflow's own HTTP retries, which raylab cuts
to about 10 s against a server, so the writes must be kept and sent later). It starts mid-trial on any machine: the
trial is held mid-epoch 2 by its own model (tests/held_recipe.py) until its first epoch is in MLflow and the server
is gone; let go then, its next epoch's writes find the server away, and the server comes back only once the driver
has said so. Nothing here depends on this machine's speed: the trial holds again after its last step, and is let go
only once the server answers again (the short form: the driver then finds it back and sends what it kept) or once
the outage is long past the minute a trial that ended waits (RAYLAB_TEST_OUTAGE_S=300, the 5-minute outage
docs/clusters.md quotes: the trial ends while the server is away, its writes go to a file after that minute, and
`raylab upload FILE` sends them).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.test_interrupt import user_env, wait_for
from tests.e2e.test_job_submit import free_port
from tests.e2e.test_resume import nothing_left

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 1
SECONDS = 90

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
OUTAGE_S = float(os.environ.get("RAYLAB_TEST_OUTAGE_S", "30"))
LONG = OUTAGE_S > 60  # past the minute a trial that ended waits: its writes go to a file, then `raylab upload`
EPOCHS, STEPS = 3, 200  # held at step 300, mid-epoch 2, and after step 600, its last


def start_server(db: Path, artifacts: Path, port: int, log: Path) -> subprocess.Popen:
    cmd = [
        str(BIN / "mlflow"),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{db}",
        "--artifacts-destination",
        str(artifacts),
    ]
    server = subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True)
    client = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}")

    def up():
        try:
            return client.search_experiments() is not None
        except Exception:  # noqa: BLE001 - not listening yet
            return False

    wait_for(up, 120, "mlflow server to answer")
    return server


def stop_server(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGKILL)  # the whole server: uvicorn and its workers
    server.wait(timeout=30)


def test_a_tracking_server_outage_mid_trial_loses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # this test's client: fail fast while it is down
    db, artifacts, log, port = tmp_path / "mlflow.db", tmp_path / "artifacts", tmp_path / "server.log", free_port()
    uri = f"http://127.0.0.1:{port}"
    server = start_server(db, artifacts, port, log)
    env = user_env(tmp_path, "MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    client = MlflowClient(tracking_uri=uri)
    gate = tmp_path / "gate"
    gate.mkdir()
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "held_recipe.py"),
        "--quick",
        "--compile",
        "off",
        "--trials",
        "torch:none",
        "--epochs",
        str(EPOCHS),
        "--steps-per-epoch",
        str(STEPS),
        "--tracking-uri",
        uri,
        "--experiment",
        "outage",
    ]
    errors = tmp_path / "driver.err"
    held = {"RAYLAB_TEST_GATE": str(gate), "RAYLAB_TEST_LAST_AT": str(EPOCHS * STEPS)}
    run = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        env={**env, **held},
        stdout=subprocess.PIPE,
        stderr=errors.open("w"),
        text=True,
        start_new_session=True,
    )
    try:

        def first_epoch_logged():
            exp = client.get_experiment_by_name("outage")
            runs = client.search_runs([exp.experiment_id]) if exp else []
            trials = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
            return trials and client.get_metric_history(trials[0].info.run_id, "val_accuracy")

        wait_for(lambda: (gate / "held-1").exists(), 480, "the trial held mid-epoch 2")
        wait_for(first_epoch_logged, 120, "the trial's first epoch in MLflow")
        stop_server(server)
        gone = time.monotonic()
        (gate / "release-1").touch()
        wait_for(lambda: "cannot be reached" in errors.read_text(), 300, "the driver to find the server gone")
        wait_for(lambda: (gate / "held-2").exists(), 480, "the trial held after its last step")
        if LONG:  # it ends while the server is away
            (gate / "release-2").touch()
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - gone)))  # the rest of the outage: nothing waits on it
        server = start_server(db, artifacts, port, log)  # returns once it answers
        (gate / "release-2").touch()  # the trial ends with the server back (the short form)
        out, _ = run.communicate(timeout=900)
        err = errors.read_text()
        assert run.returncode == 0, out[-2000:] + err[-3000:]
        if LONG:  # the writes waited a minute at the end, then went to a file: send it as it says
            (pending,) = re.findall(r"raylab upload (\S+)", err)
            sent = subprocess.run(
                [str(BIN / "raylab"), "upload", pending], env=env, capture_output=True, text=True, timeout=300
            )
            assert sent.returncode == 0, sent.stderr[-3000:]
        else:
            assert "is back" in err, err[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        stop_server(server)
    assert "cannot be reached" in err, err[-3000:]
    # Read back from the same store, with the server down again: the sqlite file it wrote.
    local = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = local.get_experiment_by_name("outage").experiment_id
    runs = local.search_runs([exp])
    assert sorted(r.info.status for r in runs) == ["FINISHED", "FINISHED"]
    (trial,) = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
    for key in ("val_accuracy", "train_loss", "epoch_time_s"):
        steps = [m.step for m in local.get_metric_history(trial.info.run_id, key)]
        assert sorted(steps) == list(range(1, EPOCHS + 1)), (key, steps)
    for key in ("samples_per_sec", "step_time_p50_ms", "startup_s", "wall_s"):
        assert key in trial.data.metrics, key
    assert trial.data.params["epochs"] == str(EPOCHS) and trial.data.tags.get("strategy_class")
    nothing_left(tmp_path)
