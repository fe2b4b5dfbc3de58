"""Keeps what the suite leaves on disk small, and says how much it wrote and how little space was left.

CI's run of 2026-11-26 died 40 minutes in with "No space left on device": the suite had kept everything it
wrote (every Ray session's logs under /tmp/ray, every trial's Ray Train storage under HOME/ray_results, every
tmp dir) until the session ended, on a machine whose disk the 10 GiB .venv had nearly filled. So each test
file cleans up after itself, once its module-scoped fixtures (and their clusters) are gone:

- the Ray session dirs (/tmp/ray/session_*) that appeared during the file and that no live process still
  uses (a package-scoped cluster's session stays until its last user is done);
- the Ray Train storage (HOME/ray_results/*) of the trials the file ran in this process's HOME;
- the tmp dirs its fixtures made (`tmp_path_factory.mktemp`), but for those of session- and package-scoped
  fixtures (LONG_LIVED), which later files still read.

A file with a failed test keeps all of it, to be read. `tmp_path` dirs of passed tests go as each test ends
(pyproject.toml: tmp_path_retention_policy = "failed"). A thread samples free space every POLL_S and keeps
the lowest, with the test running then; the terminal summary prints it with the files that wrote the most.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

POLL_S = 1.0
RAY_SESSIONS = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray"
# mktemp() names of the session- and package-scoped fixtures (tests/conftest.py template_db, tests/unit/conftest.py
# fashion_root, tests/integration/conftest.py lost_workers and lost_tf_ps): their dirs outlive the file that made them.
LONG_LIVED = {"template", "data", "lost-workers", "lost-tf-ps"}
LOW_FREE = 2 << 30  # below this much free space (2 GiB), the summary warns
_SESSION = re.compile(rb"session_\d{4}-\d\d-\d\d_[\d-]+_\d+_\d+")


def size_of(path: Path) -> int:
    """Bytes on disk under path (blocks allocated, as du counts), 0 if it is gone."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def live_sessions() -> set[str]:
    """Names of the Ray session dirs some running process names on its command line (raylet, GCS, workers)."""
    from tests.startups import cmdlines

    return {m.decode() for _, cmdline in cmdlines() for m in _SESSION.findall(cmdline)}


def entries(where: Path, pattern: str = "*") -> set[Path]:
    return set(where.glob(pattern)) if where.is_dir() else set()


@dataclass
class Mark:
    """What was there when a test file started."""

    sessions: set[Path]
    temps: set[Path]
    results: set[Path]


class Footprint(threading.Thread):
    def __init__(self, basetemp: Path, home: Path, sessions: Path = RAY_SESSIONS):
        super().__init__(daemon=True, name="disk-footprint")
        self.sessions = sessions  # where Ray makes its session dirs
        self.basetemp = basetemp  # pytest's tmp_path_factory.getbasetemp()
        self.home = home  # HOME of this process (tests/conftest.py), whose ray_results Ray Train writes to
        self.done = threading.Event()
        self.start_free = self.free()
        self.lowest = (self.start_free, "(start)")  # (free bytes, the test running then)
        self.written: dict[str, tuple[int, int, int]] = {}  # test file -> bytes it left (Ray sessions, tmp dirs,
        # trial storage), measured before the clean-up
        self.current = "(between tests)"

    def free(self) -> int:
        return shutil.disk_usage(self.basetemp.parent).free  # basetemp itself goes at the end of a passed run

    def run(self):
        while not self.done.wait(POLL_S):
            self.sample()

    def sample(self):
        free = self.free()
        if free < self.lowest[0]:
            self.lowest = (free, self.current)

    def stop(self):
        self.done.set()
        self.sample()

    def mark(self) -> Mark:
        return Mark(entries(self.sessions, "session_2*"), entries(self.basetemp), entries(self.home / "ray_results"))

    def end_of_file(self, mark: Mark, name: str, failed: bool) -> None:
        """Records what the file left and, unless one of its tests failed, removes it (see the module doc)."""
        sessions = entries(self.sessions, "session_2*") - mark.sessions
        temps = {p for p in entries(self.basetemp) - mark.temps if p.name.rstrip("0123456789") not in LONG_LIVED}
        results = entries(self.home / "ray_results") - mark.results
        self.written[name] = tuple(sum(size_of(p) for p in group) for group in (sessions, temps, results))
        if failed:
            return
        live = live_sessions()
        for path in [p for p in sessions if p.name not in live] + sorted(temps) + sorted(results):
            shutil.rmtree(path, ignore_errors=True)

    def summary(self) -> list[str]:
        gb = 1 << 30
        lines = [
            (
                f"free at start {self.start_free / gb:.1f} GiB, lowest {self.lowest[0] / gb:.1f} GiB "
                f"(during {self.lowest[1]}), now {self.free() / gb:.1f} GiB"
            )
        ]
        lines.append(
            f"test files left {sum(map(sum, self.written.values())) / gb:.2f} GiB in all, removed as each ended "
            "(but for failed files); the most:"
        )
        mb = 1 << 20
        for name, (ray, tmp, train) in sorted(
            ((k, v) for k, v in self.written.items() if sum(v)), key=lambda kv: -sum(kv[1])
        )[:5]:
            lines.append(
                f"{(ray + tmp + train) / mb:8.0f} MiB  {name} (Ray sessions {ray / mb:.0f}, tmp dirs "
                f"{tmp / mb:.0f}, Ray Train storage {train / mb:.0f})"
            )
        return lines


FOOTPRINT: Footprint | None = None
