"""Parameter-server trials on a real local Ray cluster: tf:ps trains and survives a lost worker task and a lost
ps task, and a dead server or chief fails the trial cleanly, leaving nothing behind. (Sync PS equals DDP, and
torch:ps-sync's lost server: test_fault_tolerance.py; torch:ps-async with two servers: test_matrix.py.)

tf:ps's restarts are conftest.py's `lost_tf_ps`: tf:ps x2, 3 epochs of 200 steps, losing a worker task in the
first repeat and its ps task in the second while a worker task holds in its graph mid-epoch 2 (a lost tf:ps task
takes TF's coordinator most of a minute to give up on, so there is no uninterrupted twin). The kills without
restarts are this file's own run.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import LOST_TF_PS_PLAN, held, shared_run
from tests.integration.killing import assert_nothing_left
from tests.integration.test_fault_tolerance import (
    a_lost_process_restarted_from_the_last_checkpoint,
    every_planned_process_was_lost_and_every_trial_finished,
    runs_by_trial,
)

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the trials are the shared runs'
SECONDS = 370  # lost_tf_ps (260), set up here, and the kills without restarts


def test_a_lost_tf_ps_task_restarts_from_the_chiefs_checkpoint(lost_tf_ps):
    """A worker task SIGKILLed, and in the other repeat the ps task (the variables it held come back from the
    chief's checkpoint): both repeats FINISHED, each epoch once, restarted from the last checkpoint."""
    every_planned_process_was_lost_and_every_trial_finished(lost_tf_ps, LOST_TF_PS_PLAN)
    a_lost_process_restarted_from_the_last_checkpoint(lost_tf_ps)
    assert [r for r, _ in runs_by_trial(lost_tf_ps)["tf:ps x2"]] == [True, True]


def test_tf_ps_trains_with_chief_ps_and_workers(lost_tf_ps):
    for _, run in runs_by_trial(lost_tf_ps)["tf:ps x2"]:
        assert run.info.status == "FINISHED" and run.data.metrics["val_accuracy"] > 0.6
        assert run.data.tags["strategy_class"] == "ParameterServerStrategyV2"  # tf.distribute.ParameterServerStrategy
        assert run.data.params["ray_workers"] == "4" and run.data.params["oversubscribed"] == "True"
        m = run.data.metrics
        assert m["ps_bytes_per_step"] > 0 and 0 <= m["staleness_mean"] <= m["staleness_max"]
        assert run.data.tags["replicas_consistent"] == "n/a"  # one copy of the weights, on the ps


@pytest.fixture(scope="module")
def killed_without_restarts(ray_cluster, tmp_path_factory, template_db):
    """torch:ps-sync x2 losing its server (killed through Ray) and tf:ps x2 losing its chief (SIGKILL) while the
    trial holds mid-epoch 2 (the held recipe), with --max-failures 0."""
    where = tmp_path_factory.mktemp("ps-kills")
    return shared_run(
        where,
        template_db,
        "ps-kills",
        2,
        held(where / "gate", 100),
        "--quick",
        "--epochs",
        "3",
        "--steps-per-epoch",
        "100",
        "--trials",
        "torch:ps-sync x2,tf:ps x2",
        "--max-failures",
        "0",
        kill={"torch:ps-sync x2": ["server-actor"], "tf:ps x2": ["tf-chief"]},
        seconds=100,
    )


@pytest.mark.parametrize(
    "name,expected",
    [("torch:ps-sync x2", "parameter server died mid-trial"), ("tf:ps x2", "The actor died unexpectedly")],
)
def test_killing_a_server_or_the_chief_fails_the_trial_and_leaves_nothing(killed_without_restarts, name, expected):
    """Without restarts (--max-failures 0): FAILED at once, with the reason."""
    ran = killed_without_restarts
    assert name in [n for n, _, what in ran.killer.killed if what], "the trial finished before anything was killed"
    assert ran.code == 1
    trial = ran.trials()[name]
    run = ran.client.get_run(trial["run_id"])
    assert run.info.status == "FAILED" and trial["status"] == "FAILED"
    reason = run.data.tags["error_summary"]
    assert expected in reason, reason
    assert run.data.params["max_failures"] == "0" and run.data.metrics["restarts"] == 0
    assert run.data.tags["failures"].endswith("not restarted: the restart budget (--max-failures) is spent")
    assert_nothing_left()
