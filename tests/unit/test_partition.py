"""No test in no tier: the default tier and the full tier's K slices, as the suite selects them from the real tree
(tests/tiers.py `select`), are a partition of every collected test: each in exactly one. And a TIER that is no tier
stops the run at collection, naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def collect(tmp_path: Path, *more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAYLAB_PARTITION_OUT": str(tmp_path / "partition.json")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "--full",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.partition_probe",
            *more,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_default_tier_and_the_slices_are_a_partition_of_every_collected_test(tmp_path):
    done = collect(tmp_path, "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    got = json.loads((tmp_path / "partition.json").read_text())
    every = Counter(got["default"] + [t for s in got["slices"] for t in s])
    assert len(got["all"]) > 700
    assert sorted(every) == sorted(got["all"]), set(got["all"]) ^ set(every)  # none left out, none extra
    assert [t for t, n in every.items() if n > 1] == []  # none twice
    assert all(got["slices"]), [len(s) for s in got["slices"]]  # no slice empty


def test_a_tier_that_is_no_tier_stops_the_collection_naming_the_file(tmp_path):
    stray = ROOT / "tests" / "e2e" / "test_zz_no_tier_probe.py"
    stray.write_text('TIER = "other"\nRAY_TRAIN_STARTS = 0\nSECONDS = 1\n\n\ndef test_nothing():\n    pass\n')
    try:
        done = collect(tmp_path, str(stray))
    finally:
        stray.unlink()
    assert done.returncode != 0
    assert (
        "tests/e2e/test_zz_no_tier_probe.py: TIER = 'other'; a test file's tier is one of ('default', 'full')"
        in done.stdout + done.stderr
    ), done.stdout[-2000:] + done.stderr[-2000:]
