"""A trial survives a lost worker: real worker processes SIGKILLed mid-trial on the shared local cluster.

The invocation is conftest.py's `lost_workers`: torch:ddp x2, tf:mwms x2, torch:ps-sync x2, xla:ddp x2 and jax:dp x2,
3 epochs of 200 steps, each twice (A B B A), one repeat of each losing a process while it holds mid-epoch 2 (the
held recipe, tests/held_recipe.py: a Ray Train worker, the very one that holds; ps-sync its parameter server), the
other the uninterrupted twin. Each trial checkpoints at epoch ends; Ray Train restarts the worker group from the
last checkpoint, the data order goes on where it was, and MLflow holds every epoch once. (tf:ps's lost tasks, the
other invocation: test_ps.py; the two are in different files so that a slice of the full tier holds one.)
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import LOST_STEPS_N, LOST_WORKERS_PLAN
from tests.integration.killing import children, no_train_workers_left

pytestmark = pytest.mark.integration
TIER = "full"  # the default tier's held kill and restart: test_held_restart.py
RAY_TRAIN_STARTS = 0  # the trials are the shared run's (conftest.py)
SECONDS = 640  # lost_workers, set up here
STEPS, EPOCHS = LOST_STEPS_N, 3  # per epoch, as the shared runs (RAYLAB_TEST_PACE)


def runs_by_trial(ran) -> dict[str, list]:
    """Trial name -> [(restarted, run)] in run order."""
    runs = {r.info.run_id: r for r in children(ran.client, ran.summary["parent_run_id"])}
    killed = ran.killer.killed_runs()
    out: dict[str, list] = {}
    for trial in ran.summary["trials"]:
        out.setdefault(trial["trial"], []).append((trial["run_id"] in killed, runs[trial["run_id"]]))
    return out


def every_planned_process_was_lost_and_every_trial_finished(ran, plan):
    assert ran.code == 0, ran.tail()
    planned = sum(1 for victims in plan.values() for v in victims if v)
    assert len(ran.killer.killed_runs()) == planned, (  # a miss is the Killer's defect, not raylab's failure
        f"DEFECT OF THE TEST: {planned} faults planned, these landed: {ran.killer.killed}"
    )
    for trial in ran.summary["trials"]:
        run = ran.client.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", trial
        for key in ("val_accuracy", "epoch_time_s", "train_loss"):
            steps = [m.step for m in ran.client.get_metric_history(trial["run_id"], key)]
            assert sorted(steps) == list(range(1, EPOCHS + 1)), (trial["trial"], key, steps)  # each epoch once
        assert run.data.params["max_failures"] == "1"
        assert run.data.tags["checkpointing"] == "epoch ends"
        assert run.data.metrics["checkpoints"] == EPOCHS
        assert run.data.metrics["val_accuracy"] > 0.6, (trial["trial"], run.data.metrics["val_accuracy"])
    assert no_train_workers_left()


def a_lost_process_restarted_from_the_last_checkpoint(ran):
    """FINISHED with restarts=1 where a process was lost (after epoch 1's checkpoint was safe, so it resumed at
    or past it), none elsewhere."""
    for name, restarted, run in [(n, r, run) for n, runs in runs_by_trial(ran).items() for r, run in runs]:
        m = run.data.metrics
        assert m.get("restarts", 0) == (1 if restarted else 0), (name, m)
        if restarted:
            assert run.data.tags["restarted"] == "1"
            assert m["recovery_s"] > 0 and m["lost_s"] >= 0
            assert m["resumed_from_step"] >= STEPS, m
        else:
            assert "resumed_from_step" not in m


def test_every_planned_process_was_lost_and_every_trial_finished(lost_workers):
    every_planned_process_was_lost_and_every_trial_finished(lost_workers, LOST_WORKERS_PLAN)


def test_a_lost_process_restarts_from_the_last_checkpoint(lost_workers):
    a_lost_process_restarted_from_the_last_checkpoint(lost_workers)


def test_lost_worker_restarts_from_checkpoint_and_ends_as_the_uninterrupted_run(lost_workers):
    """torch:ddp x2: equal weights to the uninterrupted repeat; tf:mwms x2: accuracy within 0.005."""
    trials = runs_by_trial(lost_workers)
    torch_runs = trials["torch:ddp x2"]
    assert sorted(r for r, _ in torch_runs) == [False, True]
    # The lost worker was in the second trial of a warm worker group: the restarted group went on with that trial.
    starts = {restarted: (r.data.params["start"], r.data.params["group_index"]) for restarted, r in torch_runs}
    assert starts == {False: ("cold", "0"), True: ("warm", "1")}, starts
    sums = {r.data.tags["param_checksums"] for _, r in torch_runs}
    assert len(sums) == 1, sums  # bit for bit the weights of the uninterrupted run
    tf_runs = trials["tf:mwms x2"]
    assert sorted(r for r, _ in tf_runs) == [False, True]
    accs = [r.data.metrics["val_accuracy"] for _, r in tf_runs]
    assert abs(accs[0] - accs[1]) <= 0.005, accs


def test_lost_parameter_server_restarts_from_its_checkpointed_shard(lost_workers):
    """torch:ps-sync x2, its parameter server SIGKILLed: the new server starts from the checkpointed shard, and
    the weights equal the uninterrupted repeat's."""
    runs = runs_by_trial(lost_workers)["torch:ps-sync x2"]
    assert sorted(r for r, _ in runs) == [False, True]
    assert len({r.data.tags["param_checksums"] for _, r in runs}) == 1


def test_jax_dp_restarts_with_a_new_jax_distributed_world_and_ends_as_the_uninterrupted_run(lost_workers):
    """jax:dp x2, a worker SIGKILLed mid-trial: the new worker group initialises jax.distributed again, reloads the
    pickled state (parameters, dropout keys, Adam's moments) and the global batch order goes on where it was: the
    weights equal the uninterrupted repeat's."""
    runs = runs_by_trial(lost_workers)["jax:dp x2"]
    assert sorted(r for r, _ in runs) == [False, True]
    # the uninterrupted twin ran after the restart, in the warm group's new processes
    assert {r: run.data.params["start"] for r, run in runs} == {True: "cold", False: "warm"}
    sums = [float(r.data.tags["param_checksums"].split(",")[0]) for _, r in runs]
    assert sums[0] == pytest.approx(sums[1], rel=1e-6), sums
    assert all(r.data.tags["replicas_consistent"] == "True" for _, r in runs)


def test_xla_restarts_from_its_checkpoint_and_ends_as_the_uninterrupted_run(lost_workers):
    """xla:ddp x2 (torch_xla's save of model, optimizer and schedule) ends with the weights of its uninterrupted
    repeat."""
    xla = runs_by_trial(lost_workers)["xla:ddp x2"]
    assert sorted(r for r, _ in xla) == [False, True]
    assert len({r.data.tags["param_checksums"] for _, r in xla}) == 1, xla  # bit for bit the uninterrupted weights


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
