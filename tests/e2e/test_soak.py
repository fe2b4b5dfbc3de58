"""The soak benchmark's short form (bench/soak.py --short, issue 48): three torch:none trials of one driver in a warm
worker group, the second's Ray Train worker SIGKILLed while it holds mid-epoch 2 (tests/held_recipe.py), against a
real `mlflow server`.
Every trial ends FINISHED, the killed one restarted exactly once, and once the driver exits nothing of its
session is left: no process with its HOME, no listening port, no /dev/shm entry, one Ray session directory."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import paced

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 1  # one warm group's fit() for the three trials; the restart after the kill keeps its controller
SECONDS = 110

ROOT = Path(__file__).resolve().parents[2]


def load_soak():
    spec = importlib.util.spec_from_file_location("bench_soak", ROOT / "bench" / "soak.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_short_soak_finishes_restarts_the_killed_trial_once_and_leaves_nothing(tmp_path, capsys):
    soak = load_soak()
    out = tmp_path / "soak.json"
    # Every wait inside has a bound: the driver is SIGKILLed after 300 s, its processes are waited for 120 s,
    # the mlflow server 120 s; whatever is left of its HOME is SIGKILLed at the end, the server too.
    code = soak.main(
        ["--short", "--driver-timeout", "300", "--settle-s", "120", "--steps", str(paced(1000)), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    found = json.loads(out.read_text())
    assert code == 0 and found["failures"] == [], printed[-4000:]
    rows = found["rows"]
    assert [r["status"] for r in rows] == ["FINISHED"] * 3, printed[-4000:]
    assert [r["killed"] for r in rows] == [False, True, False]
    assert rows[1]["restarts"] == 1 and rows[1]["killed_pid"] in rows[1]["worker_pids"]  # its own worker
    assert "one of its workers" in printed and "held mid-epoch 2; raylab restarted it 1x" in printed
    assert all(r["worker_peak_mb"] > 0 and r["driver_rss_mb"] > 0 for r in rows)
    assert all(r["processes"] > 0 and r["sessions"] == 1 for r in rows)  # sampled while the driver was up
    assert any("left 0 processes, 0 shm entries, 1 session dirs" in e for e in found["events"]), found["events"]
    assert "PASS" in printed
