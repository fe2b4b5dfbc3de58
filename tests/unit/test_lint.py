"""The code passes its linter and its formatter as configured in pyproject.toml ([tool.ruff]: pyflakes and
pycodestyle's errors; formatted at 120 columns, Lightning's width): what Ray, Lightning and Keras check in their CI.
ruff comes with the test tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_passes_on_the_whole_repository(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "No module named ruff" not in done.stderr, "ruff is a test tool: scripts/test.sh installs it"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
