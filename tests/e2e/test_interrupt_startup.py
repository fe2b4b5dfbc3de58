"""A driver stopped at each phase of its start-up (SIGTERM before Python has imported raylab, as the store opens,
inside ray.init, as the first trial's worker group starts; SIGHUP inside ray.init) leaves no process of its own
behind and no run RUNNING (raylab/runtime/stopping.py). The driver holds at the phase (tests/e2e/phased.py) until
the stop has been sent, so each case stops where it says, however fast the machine. Full tier: the default tier's
stops are test_interrupt.py's (mid-trial, held; and inside ray.init)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests import startups
from tests.e2e.test_interrupt import left_of, sqlite_store, user_env, wait_for

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 1  # the case stopped as its trial's worker group starts
SECONDS = 80

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "phase, sig",
    [("import", "SIGTERM"), ("store", "SIGTERM"), ("ray", "SIGTERM"), ("trial", "SIGTERM"), ("ray", "SIGHUP")],
)
def test_a_driver_stopped_during_its_start_up_leaves_nothing_running(tmp_path, phase, sig):
    """Stopped while held at `phase`, then let go on: a handler that deferred the stop acts as the phase ends."""
    ray_tmp = Path(tempfile.mkdtemp(prefix="rl-", dir="/tmp"))  # short: Ray's socket paths go under it
    gate = tmp_path / "gate"
    gate.mkdir()
    env = {
        **user_env(tmp_path),
        "RAY_TMPDIR": str(ray_tmp),  # every Ray process names it
        "PYTHONPATH": str(ROOT),  # the held recipe's module, in the workers too
        "RAYLAB_TEST_PHASE": phase,
        "RAYLAB_TEST_PHASE_GATE": str(gate),
    }
    uri, client = sqlite_store(tmp_path)
    cmd = [
        sys.executable,
        str(ROOT / "tests" / "e2e" / "phased.py"),
        "--quick",
        "--compile",
        "off",
        "--trials",
        "torch:none",
        "--epochs",
        "50",
        "--tracking-uri",
        uri,
        "--experiment",
        "early",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    before = startups.started_by_this_test()
    at = (gate / "held-1") if phase == "trial" else (gate / "at")
    try:

        def held():
            assert proc.poll() is None, f"the driver ended before it held at {phase}: {proc.stdout.read()[-3000:]}"
            return at.exists() and at.read_text().strip()

        wait_for(held, 300, f"the driver held at {phase}")
        proc.send_signal(getattr(signal, sig))
        (gate / ("release-1" if phase == "trial" else "go")).touch()
        deadline = time.monotonic() + 15
        out, _ = proc.communicate(timeout=60)
        while left_of(proc.pid, ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left_of(proc.pid, ray_tmp), (left_of(proc.pid, ray_tmp), out[-3000:])
        assert proc.returncode in (130, -getattr(signal, sig)), (proc.returncode, out[-3000:])
        exp = client.get_experiment_by_name("early")
        runs = client.search_runs([exp.experiment_id]) if exp else []
        assert not [r for r in runs if r.info.status == "RUNNING"], [(r.info.run_name, r.info.status) for r in runs]
        if phase == "trial":  # its trial had a run: stopped, it says so
            assert [r.info.status for r in runs if r.data.tags.get("raylab.role") == "trial"] == ["KILLED"], out[-3000:]
        assert "Traceback" not in out, out[-3000:]
        started = startups.started_by_this_test() - before
        assert started == (phase == "trial"), f"stopped at {phase}, it started {started} Ray Train runs"
    finally:
        for row in left_of(proc.pid, ray_tmp):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(row.split()[0]), signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(ray_tmp, ignore_errors=True)
