"""What a process tree listens on, read from /proc (no tool that may be missing): the listening TCP sockets of the
machine, matched to the processes holding them; and a thread that records them while a recipe runs."""

from __future__ import annotations

import ipaddress
import os
import threading
from pathlib import Path

from raylab.settings.pinning import descendants  # noqa: F401 - a process and every one below it

# The kinds of listener docs/clusters.md ("What listens on the network") names, by process title.
KINDS = {
    "gcs_server": lambda title: title.split(" ")[0].endswith("/gcs_server"),
    "raylet": lambda title: title.split(" ")[0].endswith("/raylet"),
    "ray::...": lambda title: title.startswith("ray::"),
    "the driver": lambda title: "recipes/fashion.py" in title or "tests/held_recipe.py" in title,  # its variant
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
                raw = raw[::-1] if len(raw) == 4 else b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
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


def title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def loopback(ip: str) -> bool:
    return ipaddress.ip_address(ip).is_loopback


class Listeners(threading.Thread):
    """Every (address, port) a process under `root` listens on off loopback while it runs, with the title of the
    process holding it when first seen; workers_seen: whether a Ray Train worker was caught listening."""

    def __init__(self, root: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.root, self.every = root, every
        self.seen: dict[tuple[str, int], str] = {}
        self.workers_seen = False
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(self.every):
            tree = descendants(self.root)
            for ip, port, pid in listening():
                if pid in tree and not loopback(ip):
                    now = title(pid)  # a pooled worker is "ray::IDLE" until its actor starts: read it every time
                    self.seen.setdefault((ip, port), now)
                    self.workers_seen |= now.startswith("ray::RayTrainWorker")

    def stop(self):
        self.done.set()
        if self.is_alive():
            self.join(timeout=30)
