"""Ray's session directories of the clusters raylab starts: the newest few kept, older ones removed as a new
cluster starts, never another's nor a live one's (raylab/runtime/cluster.py prune_sessions)."""

from __future__ import annotations

import os
import subprocess
import sys

from raylab.runtime.cluster import KEEP_SESSIONS, OWNED_MARK, prune_sessions


def test_only_raylabs_older_dead_sessions_beyond_the_newest_few_are_removed(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process that started a cluster and has ended
    dead, alive = gone.pid, os.getpid()

    def session(minute: int, pid: int, ours: bool = True):
        d = tmp_path / f"session_2026-11-27_10-{minute:02d}-00_000000_{pid}"
        (d / "logs").mkdir(parents=True)
        if ours:
            (d / OWNED_MARK).touch()
        return d

    old = [session(m, dead) for m in range(5)]
    live = session(5, alive)  # an older cluster whose driver still runs
    other = session(6, dead, ours=False)  # `ray start`'s, or another tool's
    recent = [session(m, dead) for m in (7, 8)]
    now = session(9, alive, ours=False)
    removed = prune_sessions(now)
    assert (now / OWNED_MARK).exists() and now.exists()
    # ours, older than the newest KEEP_SESSIONS (now included), whose process has ended
    assert KEEP_SESSIONS == 3 and sorted(removed) == old
    assert all(not d.exists() for d in old) and live.exists() and other.exists() and all(d.exists() for d in recent)
    assert prune_sessions(now) == []
