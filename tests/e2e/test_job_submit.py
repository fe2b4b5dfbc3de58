"""As a user sets it up: `ray start --head` on loopback with token authentication, a client that holds the token.

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

pytestmark = pytest.mark.e2e
TIER = "full"  # the default tier's job through a token: tests/e2e/test_walkthrough.py
RAY_TRAIN_STARTS = 0
SECONDS = 35

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def head(tmp_path):
    """A Ray head on loopback with its dashboard (the job server); stopped whatever happens."""
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
    }
    env.pop("RAY_AUTH_TOKEN", None)
    (tmp_path / "home").mkdir()
    subprocess.run(
        [str(BIN / "ray"), "get-auth-token", "--generate"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    port, dash = free_port(), free_port()
    start = [
        str(BIN / "ray"),
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        "--disable-usage-stats",
    ]
    try:
        subprocess.run(start, env=env, check=True, capture_output=True, text=True, timeout=120)
        yield env, f"http://127.0.0.1:{dash}"
    finally:
        # `ray stop` stops every Ray cluster on this machine: don't run this test beside other Ray work.
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_a_client_with_the_token_gets_in_and_one_without_is_turned_away(head, tmp_path):
    """A client machine (a HOME of its own) reaches the head's job server with the head's token in
    RAY_AUTH_TOKEN, and is refused without it. (The submitted job itself, its trials FINISHED under one
    parent run, is the README's own `ray job submit`: tests/e2e/test_readme.py.)"""
    head_env, address = head
    token = (Path(head_env["HOME"]) / ".ray" / "auth_token").read_text().strip()
    (tmp_path / "client").mkdir()
    env = {**head_env, "HOME": str(tmp_path / "client"), "RAY_AUTH_TOKEN": token}
    listing = [str(BIN / "ray"), "job", "list", f"--address={address}"]
    deadline = time.monotonic() + 120
    while True:  # the dashboard can answer before its job agent is up
        allowed = subprocess.run(listing, env=env, capture_output=True, text=True, timeout=120)
        if allowed.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert allowed.returncode == 0, allowed.stdout[-3000:] + allowed.stderr[-3000:]
    env.pop("RAY_AUTH_TOKEN")
    refused = subprocess.run(listing, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "token-auth" in refused.stdout + refused.stderr  # Ray names its auth docs
