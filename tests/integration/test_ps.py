"""Parameter-server trials on a real local Ray cluster: sync PS equals DDP, tf:ps trains, and a dead server or
chief fails the trial cleanly, leaving nothing behind. (torch:ps-async with two servers: test_matrix.py.)

The trained trials are conftest.py's shared runs: the uninterrupted ps-sync and DDP twins of `lost_workers` (3
epochs of 200 steps), and `lost_tf_ps`'s tf:ps (both repeats lost a task and restarted); the kills without
restarts are this file's own run.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import held, shared_run
from tests.integration.killing import assert_nothing_left
from tests.integration.test_fault_tolerance import runs_by_trial

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the trials are the shared runs'
SECONDS = 100

def test_torch_ps_sync_computes_what_ddp_computes(lost_workers):
    """Same seed, same shards, same order: averaged gradients applied once equal DDP's all-reduce."""
    trials = runs_by_trial(lost_workers)
    (ddp,) = [r for restarted, r in trials["torch:ddp x2"] if not restarted]
    (ps,) = [r for restarted, r in trials["torch:ps-sync x2"] if not restarted]
    ddp_sum = [float(v) for v in ddp.data.tags["param_checksums"].split(",")]
    ps_sum = [float(v) for v in ps.data.tags["param_checksums"].split(",")]
    assert len(ps_sum) == 2 and ps.data.tags["replicas_consistent"] == "True"
    assert ps_sum[0] == pytest.approx(ddp_sum[0], rel=1e-5)
    assert ps.data.metrics["val_accuracy"] == pytest.approx(ddp.data.metrics["val_accuracy"], abs=2e-3)
    assert ps.data.metrics["val_accuracy"] > 0.6
    assert ps.data.params["parameter_servers"] == "1" and ps.data.params["ray_workers"] == "3"
    # 3 processes on 2 CPUs: it ran, on a share of the CPUs, and says so.
    assert ps.data.params["oversubscribed"] == "True" and float(ps.data.params["cpus_per_process"]) < 1
    assert ddp.data.params["oversubscribed"] == "False"
    m = ps.data.metrics
    assert m["ps_push_pull_ms"] > 0 and m["ps_bytes_per_step"] == 2 * 101_770 * 4 * 2


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
    return shared_run(where, template_db, "ps-kills", 2, held(where / "gate", 100), "--quick", "--epochs", "3",
                      "--steps-per-epoch", "100", "--trials", "torch:ps-sync x2,tf:ps x2", "--max-failures", "0",
                      kill={"torch:ps-sync x2": ["server-actor"], "tf:ps x2": ["tf-chief"]}, seconds=100)


@pytest.mark.parametrize("name,expected", [("torch:ps-sync x2", "parameter server died mid-trial"),
                                           ("tf:ps x2", "The actor died unexpectedly")])
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
