"""The code passes its linter as configured in pyproject.toml ([tool.ruff]: pyflakes and pycodestyle's errors, lines
of at most 135 characters): what Ray, Lightning and Keras check in their CI. ruff comes with the test tools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_check_passes_on_the_whole_repository():
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "No module named ruff" not in done.stderr, "ruff is a test tool: scripts/test.sh installs it"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
