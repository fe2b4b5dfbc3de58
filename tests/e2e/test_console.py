"""What a user sees on a terminal: raylab's own lines only; the rest in a log file per trial.

The recipe runs as a user runs it (`python RECIPE --quick`) with its stdout and stderr on a pseudo-terminal,
one trial broken on purpose (the quiet run is also where a failing trial's run in MLflow is checked, and that
the next trial still runs). Without --verbose no line of Ray's, TensorFlow's, PyTorch's or MLflow's may
reach the terminal, the failed trial prints its reason and log file, and the log files hold what Ray's
processes printed; with --verbose that output is on the terminal too.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
TIER = "full"  # a trial's own error named: tests/unit/test_failure.py, test_outcome.py in the default tier
RAY_TRAIN_STARTS = 2  # the quiet run's two trials (the verbose run: test_console_verbose.py, full tier)
SECONDS = 85

ROOT = Path(__file__).resolve().parents[2]
RECIPE = """
import sys
sys.path.insert(0, {recipes!r})
from fashion import RECIPE
from raylab import main


def broken_model():
    raise RuntimeError("this model builder is broken on purpose")


if __name__ == "__main__":
    main(RECIPE.variant(models={{**RECIPE.models, "torch": broken_model}}))
"""
# What other programs print: Ray's prefixes and log lines, absl/glog, Python warnings, MLflow's logging.
FOREIGN = re.compile(
    r"pid=\d+|^\(\w+|^\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d|^[IWEF]\d{4} \d\d:|^E0000|"
    r"Warning:|warnings\.warn|INFO|absl|cuInit|oneDNN|Gloo|core_worker|Token authentication"
)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def on_a_terminal(args: list[str], cwd: Path, timeout: float = 600) -> tuple[int, list[str]]:
    """(exit code, the lines a terminal would show: each carriage-return redraw's final state)."""
    leader, follower = pty.openpty()
    env = {**os.environ, "HOME": str(cwd / "home"), "COLUMNS": "160", "TERM": "xterm"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
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
    return code, [
        line.split("\r")[-1] if line.split("\r")[-1] else line for line in text.replace("\r\n", "\n").split("\n")
    ]


def write_recipe(where: Path) -> Path:
    (where / "home").mkdir()
    path = where / "broken.py"
    path.write_text(RECIPE.format(recipes=str(ROOT / "recipes")))
    return path


@pytest.fixture(scope="module")
def quiet(tmp_path_factory):
    """The broken torch:ddp trial, then tf:none, as a user runs them on a terminal (with --concurrency auto, which
    on one node runs one trial at a time, and a --json summary): (exit code, the terminal's lines, its cwd)."""
    where = tmp_path_factory.mktemp("quiet")
    recipe = write_recipe(where)
    code, lines = on_a_terminal(
        [
            str(recipe),
            "--quick",
            "--compile",
            "off",
            "--trials",
            "torch:ddp,tf:none",
            "--workers",
            "1",
            "--concurrency",
            "auto",
            "--json",
            str(where / "summary.json"),
        ],
        where,
    )
    return code, lines, where


def test_quiet_console_names_the_failed_trials_log(quiet):
    code, lines, where = quiet
    shown = "\n".join(lines)
    assert code == 1, shown[-3000:]
    foreign = [line for line in lines if FOREIGN.search(line)]
    assert not foreign, foreign
    failed = re.search(r"^\[torch:ddp x1\] FAILED: .*broken on purpose.* \(log: (\S+\.log)\)$", shown, re.M)
    assert failed, shown[-3000:]
    assert re.search(r"^tf:none x1 +FINISHED", shown, re.M), shown[-3000:]
    assert re.search(r"^\[tf:none x1\] epoch 1 done in", shown, re.M), shown[-3000:]
    logs = sorted((where / "raylab-logs").glob("*/*.log"))
    assert [p.name for p in logs] == ["01-torch-ddp-x1.log", "02-tf-none-x1.log", "driver.log"], logs
    assert (where / failed.group(1)).resolve() == logs[0].resolve()
    torch_log, tf_log = logs[0].read_text(), logs[1].read_text()
    assert "TrainController pid=" in torch_log and "broken on purpose" in torch_log  # the worker's traceback
    assert "RayTrainWorker pid=" in tf_log
    assert "Started a local Ray instance" in logs[2].read_text()  # Ray's start-up notice, not on the terminal


def test_failing_trial_is_failed_and_the_next_still_runs(quiet):
    """A trial whose model cannot be built ends FAILED with the error, unrestarted, with its log file as an
    artifact of its run; the following trial still runs; nothing is left RUNNING."""
    from mlflow.tracking import MlflowClient

    code, lines, where = quiet
    summary = json.loads((where / "summary.json").read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{where / 'mlflow.db'}")
    assert code == 1
    assert client.get_run(summary["parent_run_id"]).data.params["concurrency"] == "1"
    tags = [client.get_run(t["run_id"]).data.tags for t in summary["trials"]]
    assert [t["overlapped_with"] for t in tags] == ["none", "none"]
    assert float(tags[0]["trial_ended"]) <= float(tags[1]["trial_started"])
    failed, finished = summary["trials"]
    assert (failed["status"], finished["status"]) == ("FAILED", "FINISHED")
    run = client.get_run(failed["run_id"])
    assert run.info.status == "FAILED"
    assert "broken on purpose" in run.data.tags["error"]
    # the recipe's own error: not restarted (the default --max-failures 1 is kept for lost processes)
    assert run.data.metrics["restarts"] == 0
    assert run.data.tags["failure_where"].startswith("the recipe's `broken_model` (")
    log = re.search(r"\[torch:ddp x1\] FAILED: .*broken on purpose.* \(log: (raylab-logs/\S+\.log)\)", "\n".join(lines))
    assert log and (where / log.group(1)).is_file()
    assert Path(log.group(1)).name in [a.path for a in client.list_artifacts(failed["run_id"])]
    assert client.get_run(summary["parent_run_id"]).info.status == "FAILED"
    running = client.search_runs([run.info.experiment_id], filter_string="attributes.status = 'RUNNING'")
    assert running == []
