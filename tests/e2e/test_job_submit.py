"""As a user does it: `ray start --head` on loopback, `ray job submit` a recipe, results in MLflow.

Token authentication as a user sets it up (README, docs/clusters.md): `ray get-auth-token --generate` on the head,
`RAY_AUTH_MODE=token ray start --head`; the submitting side has a HOME of its own, as a laptop
would, and gets the token copied from the head into RAY_AUTH_TOKEN. (`ray start` alone leaves
authentication off; only an in-process `ray.init()` turns it on by itself.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def head(tmp_path):
    """A Ray head on loopback with its dashboard (the job server); stopped whatever happens."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    env.pop("RAY_AUTH_TOKEN", None)
    (tmp_path / "home").mkdir()
    subprocess.run([str(BIN / "ray"), "get-auth-token", "--generate"], env=env, check=True, capture_output=True,
                   text=True, timeout=60)
    port, dash = free_port(), free_port()
    start = [str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
             "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
             "--disable-usage-stats"]
    try:
        subprocess.run(start, env=env, check=True, capture_output=True, text=True, timeout=120)
        yield env, f"http://127.0.0.1:{dash}"
    finally:
        # `ray stop` stops every Ray cluster on this machine: don't run this test beside other Ray work.
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_job_submit_runs_every_trial_under_one_parent(head, tmp_path):
    """The submitted recipe's trials all land in MLflow under one parent run, FINISHED."""
    head_env, address = head
    token = (Path(head_env["HOME"]) / ".ray" / "auth_token").read_text().strip()
    (tmp_path / "client").mkdir()
    env = {**head_env, "HOME": str(tmp_path / "client")}
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    env["RAY_AUTH_TOKEN"] = token
    cmd = [str(BIN / "ray"), "job", "submit", f"--address={address}", f"--working-dir={ROOT}", "--",
           "python", "recipes/fashion.py", "--quick", "--trials", "tf:none,torch:ddp", "--workers", "1",
           "--tracking-uri", uri, "--experiment", "e2e"]
    deadline = time.monotonic() + 120
    while True:  # the dashboard can answer before its job agent takes submissions
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if "No available agent to submit job" not in done.stderr + done.stdout or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "succeeded" in done.stdout
    # Without the token the same client is turned away.
    env.pop("RAY_AUTH_TOKEN")
    refused = subprocess.run([str(BIN / "ray"), "job", "list", f"--address={address}"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "token-auth" in refused.stdout + refused.stderr  # Ray names its auth docs

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("e2e")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("raylab.role") == "parent"]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(r.info.run_name for r in children) == ["tf:none x1", "torch:ddp x1"]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all(r.data.metrics["val_accuracy"] > 0.6 for r in children)
