"""What a user sees on a terminal: raylab's own lines only; the rest in a log file per trial.

The recipe runs as a user runs it (`python RECIPE --quick`) with its stdout and stderr on a pseudo-terminal,
one trial broken on purpose. Without --verbose no line of Ray's, TensorFlow's, PyTorch's or MLflow's may
reach the terminal, the failed trial prints its reason and log file, and the log files hold what Ray's
processes printed; with --verbose that output is on the terminal too.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RECIPE = '''
import sys
sys.path.insert(0, {recipes!r})
from fashion import RECIPE
from raylab import main


def broken_model():
    raise RuntimeError("this model builder is broken on purpose")


if __name__ == "__main__":
    main(RECIPE.variant(models={{**RECIPE.models, "torch": broken_model}}))
'''
# What other programs print: Ray's prefixes and log lines, absl/glog, Python warnings, MLflow's logging.
FOREIGN = re.compile(r"pid=\d+|^\(\w+|^\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d|^[IWEF]\d{4} \d\d:|^E0000|"
                     r"Warning:|warnings\.warn|INFO|absl|cuInit|oneDNN|Gloo|core_worker|Token authentication")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def on_a_terminal(args: list[str], cwd: Path, timeout: float = 600) -> tuple[int, list[str]]:
    """(exit code, the lines a terminal would show: each carriage-return redraw's final state)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "HOME": str(cwd / "home"), "COLUMNS": "160", "TERM": "xterm"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env=env, start_new_session=True)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the process closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    try:
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    text = ANSI.sub("", b"".join(chunks).decode(errors="replace"))
    return code, [line.split("\r")[-1] if line.split("\r")[-1] else line for line in text.replace("\r\n", "\n").split("\n")]


@pytest.fixture
def recipe(tmp_path):
    (tmp_path / "home").mkdir()
    path = tmp_path / "broken.py"
    path.write_text(RECIPE.format(recipes=str(ROOT / "recipes")))
    return path


def test_quiet_console_names_the_failed_trials_log(recipe, tmp_path):
    code, lines = on_a_terminal([str(recipe), "--quick", "--trials", "torch:none,tf:none"], tmp_path)
    shown = "\n".join(lines)
    assert code == 1, shown[-3000:]
    foreign = [line for line in lines if FOREIGN.search(line)]
    assert not foreign, foreign
    failed = re.search(r"^\[torch:none x1\] FAILED: .*broken on purpose.* \(log: (\S+\.log)\)$", shown, re.M)
    assert failed, shown[-3000:]
    assert re.search(r"^tf:none x1 +FINISHED", shown, re.M), shown[-3000:]
    assert re.search(r"^\[tf:none x1\] epoch 1 done in", shown, re.M), shown[-3000:]
    logs = sorted((tmp_path / "raylab-logs").glob("*/*.log"))
    assert [p.name for p in logs] == ["01-torch-none-x1.log", "02-tf-none-x1.log", "driver.log"], logs
    assert (tmp_path / failed.group(1)).resolve() == logs[0].resolve()
    torch_log, tf_log = logs[0].read_text(), logs[1].read_text()
    assert "TrainController pid=" in torch_log and "broken on purpose" in torch_log  # the worker's traceback
    assert "RayTrainWorker pid=" in tf_log
    assert "Started a local Ray instance" in logs[2].read_text()  # Ray's start-up notice, not on the terminal


def test_verbose_console_shows_the_others_output(recipe, tmp_path):
    code, lines = on_a_terminal([str(recipe), "--quick", "--trials", "torch:none", "--verbose"], tmp_path)
    shown = "\n".join(lines)
    assert code == 1, shown[-3000:]
    assert re.search(r"\(TrainController pid=\d+", shown), shown[-3000:]
    assert "broken on purpose" in shown
