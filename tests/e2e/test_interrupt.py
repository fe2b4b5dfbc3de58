"""A recipe stopped mid-trial (SIGTERM, as `ray job stop` sends) leaves its runs KILLED, not RUNNING."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def user_env(home: Path, *unset: str) -> dict:
    """A fresh user's environment for a recipe run in a subprocess: its own HOME, Ray's default auth."""
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", *unset):  # the default: ray.init() makes its own token
        env.pop(k, None)
    return env


def sqlite_store(where: Path) -> tuple[str, MlflowClient]:
    """(URI, client) of a sqlite MLflow store, created and migrated now: a reader racing the recipe's migration
    fails."""
    uri = f"sqlite:///{where}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments()
    return uri, client


def test_sigterm_marks_the_trial_and_parent_killed(tmp_path):
    env = user_env(tmp_path)
    uri, client = sqlite_store(tmp_path)
    cmd = [sys.executable, str(ROOT / "recipes" / "fashion.py"), "--trials", "torch:none", "--workers", "1",
           "--epochs", "50", "--tracking-uri", uri, "--experiment", "stopped"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        def first_epoch_logged():
            exp = client.get_experiment_by_name("stopped")
            runs = client.search_runs([exp.experiment_id]) if exp else []
            trials = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
            return trials and client.get_metric_history(trials[0].info.run_id, "val_accuracy") and runs

        wait_for(first_epoch_logged, 480, "the trial's first epoch in MLflow")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out[-3000:]
        runs = client.search_runs([client.get_experiment_by_name("stopped").experiment_id])
        assert sorted(r.info.status for r in runs) == ["KILLED", "KILLED"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
