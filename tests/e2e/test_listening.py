"""The MLflow UI command the README gives listens on loopback only, read from /proc. (What a running trial's
in-process cluster listens on: test_interrupt.py, on the run it stops.)"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.listening import descendants, listening, loopback

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e
TIER = "full"  # the default tier's: tests/e2e/test_walkthrough.py reads the README's UI's listeners
RAY_TRAIN_STARTS = 0
SECONDS = 40


def answers(port: int) -> bool:
    """Whether the UI serves a page on 127.0.0.1:port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def test_the_readmes_mlflow_ui_listens_on_loopback_only(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^\.venv/bin/mlflow ui (.*?) &", readme, re.M).group(1)
    assert "--host 127.0.0.1" in command
    args = command.replace("$PWD", str(tmp_path)).replace("--port 5000", f"--port {port}").split()
    server = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "mlflow"), "ui", *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # Every socket the UI's processes listen on, read until it serves pages (its workers have bound by then) and
        # twice more after: a listener that comes late is still seen, and one off loopback at any read fails.
        seen: set = set()
        deadline, served, reads_after = time.monotonic() + 120, False, 0
        while time.monotonic() < deadline and reads_after < 3:
            tree = descendants(server.pid)
            seen |= {(ip, p) for ip, p, pid in listening() if pid in tree}
            if served:
                reads_after += 1
            else:
                served = answers(port)
            time.sleep(0.5)
        assert served, f"the UI did not answer on port {port} within 120 s"
        assert ("127.0.0.1", port) in seen, seen
        assert all(loopback(ip) for ip, _ in seen), seen
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
