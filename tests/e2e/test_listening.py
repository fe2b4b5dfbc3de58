"""What a running trial's in-process cluster listens on, read from /proc: nothing on a non-loopback address
that docs/clusters.md does not name; the MLflow UI command the README gives listens on loopback only."""

from __future__ import annotations

import ipaddress
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e

# The kinds of listener docs/clusters.md ("What listens on the network") names, by process title.
KINDS = {
    "gcs_server": lambda title: title.split(" ")[0].endswith("/gcs_server"),
    "raylet": lambda title: title.split(" ")[0].endswith("/raylet"),
    "ray::...": lambda title: title.startswith("ray::"),
    "the driver": lambda title: "recipes/fashion.py" in title,
    "autoscaler/_private/monitor.py": lambda title: "autoscaler/_private/monitor.py" in title,
    "dashboard/dashboard.py": lambda title: "dashboard/dashboard.py" in title,
}


def listening() -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket of the machine (/proc/net/tcp and tcp6)."""
    inodes = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # LISTEN
                ip, port = f[1].split(":")
                raw = bytes.fromhex(ip)
                raw = raw[::-1] if len(raw) == 4 else b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                inodes[f[9]] = (str(ipaddress.ip_address(raw)), int(port, 16))
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        out += [(*inodes[ln[8:-1]], int(proc.name)) for ln in links if ln.startswith("socket:[") and ln[8:-1] in inodes]
    return out


def descendants(root: int) -> set[int]:
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def loopback(ip: str) -> bool:
    return ipaddress.ip_address(ip).is_loopback


def test_a_running_trials_cluster_listens_off_loopback_only_as_documented(tmp_path):
    docs = (ROOT / "docs" / "clusters.md").read_text()
    section = docs.split("## What listens on the network", 1)[1].split("\n## ", 1)[0]
    for kind in KINDS:
        assert f"`{kind}`" in section or kind in section, kind  # the table names every kind the test allows
    driver = subprocess.Popen([sys.executable, str(ROOT / "recipes" / "fashion.py"), "--quick", "--trials",
                               "torch:ddp x2", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    seen: dict[tuple[str, int], str] = {}
    workers_seen = False
    try:
        deadline = time.monotonic() + 300
        while driver.poll() is None and time.monotonic() < deadline:
            tree = descendants(driver.pid)
            for ip, port, pid in listening():
                if pid in tree and not loopback(ip):
                    now = title(pid)  # a pooled worker is "ray::IDLE" until its actor starts: read it every time
                    seen.setdefault((ip, port), now)
                    workers_seen |= now.startswith("ray::RayTrainWorker")
            time.sleep(0.5)
        assert driver.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert workers_seen, seen  # the trial's own workers were caught listening
    unnamed = {where: t for where, t in seen.items() if not any(match(t) for match in KINDS.values())}
    assert not unnamed, unnamed


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
