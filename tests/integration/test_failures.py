"""A trial's own error fails it at once, unrestarted, saying where; out of memory is named (TF here; torch in
test_out_of_memory.py; both full tier). Real trials on the shared local cluster, real allocator failures under a cap.
(A Native metric returning plain numbers: test_matrix.py.)"""

from __future__ import annotations

import re

import pytest

from tests.integration.conftest import load_recipe
from tests.integration.test_out_of_memory import out_of_host_memory_is_named_and_the_next_trial_runs

pytestmark = pytest.mark.integration
TIER = "full"  # the default tier's trial out of memory: test_out_of_memory.py (torch)
# the broken loss in torch and TF; the CNN at two batches in TF; no process group (2): 6 alone (2026-12-06, with
# RAYLAB_DEBUG_STARTUPS), but 7 once in slice 5 of a whole --full run that day, the seventh not identified (TF's
# worker aborting out of memory, below, is restarted on some CPUs): declared 7 so that slice does not fail on it
RAY_TRAIN_STARTS = 7
SECONDS = 300

FASHION = load_recipe("fashion")


def torch_loss_raising(y, p):
    raise ValueError("this loss is broken on purpose")


def tf_loss_raising(y, p):
    raise ValueError("this loss is broken on purpose")


def test_a_loss_that_raises_fails_at_once_unrestarted_naming_the_function(run_recipe, capsys):
    """torch:ddp x2 and tf:mwms x2 with the default restart budget (1): FAILED at their first step, restarts 0, the
    recipe's function named. (At once is counted in steps and attempts, not seconds: no epoch ended, one failure,
    no second attempt, on a machine of any speed.)"""
    from raylab import Native

    recipe = FASHION.variant(loss=Native(tf=tf_loss_raising, torch=torch_loss_raising, name="broken"))
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "torch:ddp x2,tf:mwms x2")
    assert code == 1
    err = capsys.readouterr().err
    for trial, fn in zip(summary["trials"], ("torch_loss_raising", "tf_loss_raising")):
        run = client.get_run(trial["run_id"])
        assert run.info.status == "FAILED"
        assert run.data.metrics["restarts"] == 0
        tags = run.data.tags
        assert tags["failure_kind"] == "error"
        assert tags["failure_where"].startswith(f"the recipe's `{fn}` (")
        assert re.match(
            rf"ValueError: this loss is broken on purpose raised in the recipe's `{fn}` "
            r"\(.*test_failures.py:\d+\) on rank \d; not restarted",
            tags["error_summary"],
        ), tags
        assert tags["failures"].endswith("-> not restarted: the trial's own code raised"), tags["failures"]
        assert "|" not in tags["failures"]  # one failure, no second attempt
        assert f"[{trial['trial']}] FAILED: ValueError: this loss is broken on purpose raised in the recipe's" in err
        # the first step is the failure: no epoch ended, nothing was trained past it
        assert client.get_metric_history(trial["run_id"], "train_loss") == [], trial["trial"]
        assert "val_accuracy" not in run.data.metrics, run.data.metrics


def test_tf_running_out_of_host_memory_is_named_and_the_next_trial_runs(run_recipe, capsys):
    out_of_host_memory_is_named_and_the_next_trial_runs(run_recipe, "tf:none")


def test_a_process_group_that_cannot_form_fails_its_trial_and_frees_its_cpus(tmp_path):
    """torch:ddp x2 whose gloo process group cannot form (GLOO_SOCKET_IFNAME names no interface: the workers'
    set-up raises in Ray Train's backend, after the group was built) holds both CPUs of the driver's own 2-CPU
    cluster: it ends FAILED naming gloo's error, its group is ended (policy.StartGuard), and the next trial gets
    the CPUs and FINISHES. Before, that trial waited for them without end."""
    import subprocess
    import sys

    from tests.e2e.test_interrupt import sqlite_store, user_env
    from tests.integration.conftest import ROOT

    uri, client = sqlite_store(tmp_path)
    env = {**user_env(tmp_path), "GLOO_SOCKET_IFNAME": "raylab-none"}  # the driver's cluster: every worker has it
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "recipes" / "fashion.py"),
            "--quick",
            "--trials",
            "torch:ddp x2,tf:none",
            "--steps-per-epoch",
            "20",
            "--fresh-processes",
            "--tracking-uri",
            uri,
            "--experiment",
            "no-group",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    runs = {
        r.info.run_name.split(" r")[0]: r
        for r in client.search_runs([client.get_experiment_by_name("no-group").experiment_id])
        if r.data.tags.get("raylab.role") == "trial"
    }
    failed, ran = runs["torch:ddp x2"], runs["tf:none x1"]
    assert failed.info.status == "FAILED" and "Unable to find address for: raylab-none" in done.stderr, done.stderr
    assert ran.info.status == "FINISHED", ran.data.tags
