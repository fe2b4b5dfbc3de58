"""The suite's own disk clean-up (tests/footprint.py), on dirs of its own: what a passed file leaves goes, what a
live Ray process or a later file still uses stays, and a failed file keeps everything."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.footprint import Footprint, live_sessions


def _layout(tmp_path):
    base, home, sessions = tmp_path / "base", tmp_path / "home", tmp_path / "ray"
    for d in (base, home / "ray_results", sessions):
        d.mkdir(parents=True)
    return base, home, sessions


def _leave(base, home, sessions):
    """What a test file leaves: a tmp dir, a long-lived fixture's dir, trial storage, a dead and a live session."""
    for d in (
        base / "stream0",
        base / "template1",
        home / "ray_results" / "raylab-abc",
        sessions / "session_2026-11-26_17-00-00_000001_1",
        sessions / "session_2026-11-26_17-00-01_000002_2",
    ):
        d.mkdir()
        (d / "f").write_bytes(b"x" * 100_000)


def test_a_passed_file_leaves_only_what_is_still_used(tmp_path):
    base, home, sessions = _layout(tmp_path)
    fp = Footprint(base, home, sessions)
    mark = fp.mark()
    _leave(base, home, sessions)
    live = sessions / "session_2026-11-26_17-00-01_000002_2"
    # a process naming the session dir on its command line, as a raylet does
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"--session_dir={live}"])
    try:
        deadline = time.monotonic() + 10
        while live.name not in live_sessions() and time.monotonic() < deadline:
            time.sleep(0.05)
        fp.end_of_file(mark, "tests/x/test_a.py", failed=False)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert sorted(p.name for p in base.iterdir()) == ["template1"]
    assert list((home / "ray_results").iterdir()) == []
    assert [p.name for p in sessions.iterdir()] == [live.name]
    ray, tmp, train = fp.written["tests/x/test_a.py"]  # measured before the clean-up
    assert ray >= 2 * 100_000 and train >= 100_000 and 100_000 <= tmp < 2 * 100_000  # template1 not counted


def test_a_failed_file_keeps_everything_and_the_summary_names_it(tmp_path):
    base, home, sessions = _layout(tmp_path)
    fp = Footprint(base, home, sessions)
    mark = fp.mark()
    _leave(base, home, sessions)
    fp.end_of_file(mark, "tests/x/test_b.py", failed=True)
    assert len(list(base.iterdir())) == 2 and len(list(sessions.iterdir())) == 2
    assert len(list((home / "ray_results").iterdir())) == 1
    fp.current = "tests/x/test_b.py::test_one"
    fp.stop()
    lines = fp.summary()
    assert lines[0].startswith("free at start ") and "GiB" in lines[0]
    assert "tests/x/test_b.py (Ray sessions 0, tmp dirs 0, Ray Train storage 0)" in lines[2]  # 0 MiB: rounded
