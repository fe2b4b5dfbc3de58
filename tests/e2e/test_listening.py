"""The MLflow UI command the README gives listens on loopback only, read from /proc. (What a running trial's
in-process cluster listens on: test_interrupt.py, on the run it stops.)"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.listening import descendants, listening, loopback

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 0

def test_the_readmes_mlflow_ui_listens_on_loopback_only(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^\.venv/bin/mlflow ui (.*?) &", readme, re.M).group(1)
    assert "--host 127.0.0.1" in command
    args = command.replace("$PWD", str(tmp_path)).replace("--port 5000", f"--port {port}").split()
    server = subprocess.Popen([str(ROOT / ".venv" / "bin" / "mlflow"), "ui", *args], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        mine: list = []
        while time.monotonic() < deadline and not mine:
            tree = descendants(server.pid)
            mine = [(ip, p) for ip, p, pid in listening() if pid in tree]
            time.sleep(0.5)
        time.sleep(2)  # its workers bind too
        tree = descendants(server.pid)
        mine = [(ip, p) for ip, p, pid in listening() if pid in tree]
        assert (("127.0.0.1", port) in mine), mine
        assert all(loopback(ip) for ip, _ in mine), mine
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
