"""Trials on a simulated multi-node cluster: workers on different nodes, TPU scheduling, the TPU fallback. (Two node
types in one invocation: test_node_types.py, default tier.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import shared_run
from tests.multinode.conftest import load_recipe

pytestmark = pytest.mark.multinode
TIER = "full"
SECONDS = 200
RAY_TRAIN_STARTS = 2  # tf:tpu failing and falling back; the trials side by side and on two types are shared runs

FASHION = load_recipe("fashion")


def child_runs(client, summary):
    parent = client.get_run(summary["parent_run_id"])
    return client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{summary['parent_run_id']}'"
    )


@pytest.fixture(scope="module")
def side_by_side(cluster, tmp_path_factory, template_db):
    """tf:none, torch:ddp x2 and tf:mwms x2 with --concurrency auto, once for the tests that read it: tf:none
    holds one node while torch:ddp x2 holds the other two."""
    return shared_run(
        tmp_path_factory.mktemp("side-by-side"),
        template_db,
        "multinode-side-by-side",
        3,
        FASHION,
        "--quick",
        "--trials",
        "tf:none,torch:ddp x2,tf:mwms x2",
        "--concurrency",
        "auto",
        seconds=100,
    )


def test_data_parallel_trials_span_nodes(side_by_side, cluster):
    """2 workers of 1 CPU on 1-CPU nodes must sit on two nodes; they still train, agree and report."""
    _, node_ids = cluster
    code, summary, client = side_by_side.code, side_by_side.summary, side_by_side.client
    assert code == 0, summary
    for trial in summary["trials"]:
        if trial["trial"] not in ("tf:mwms x2", "torch:ddp x2"):
            continue
        assert trial["status"] == "FINISHED" and trial["val_accuracy"] > 0.6
        tags = client.get_run(trial["run_id"]).data.tags
        assert tags["worker_nodes"] == "2", tags["worker_node_ids"]
        assert tags["replicas_consistent"] == "True"
        assert set(tags["worker_node_ids"].split(",")) <= {n[:12] for n in node_ids.values()}


def test_tf_tpu_fails_clearly_on_a_host_without_a_real_tpu(run_recipe, cluster):
    """The TPU host is scheduled (Ray gives the worker its chips), the resolver finds no TPU: FAILED, clear reason."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "tf:tpu")
    assert code == 1
    (trial,) = summary["trials"]
    assert trial["status"] == "FAILED" and trial["strategy"] == "tpu"
    run = client.get_run(trial["run_id"])
    assert run.info.status == "FAILED"
    assert "no TPU on" in run.data.tags["error_summary"]
    assert "--tpu-fallback mirrored" in run.data.tags["error_summary"]


def test_tf_tpu_fallback_runs_mirrored_and_records_it(run_recipe, cluster):
    """--tpu-fallback mirrored: it runs on the TPU host's worker as MirroredStrategy and says so everywhere."""
    _, node_ids = cluster
    code, summary, client = run_recipe(
        FASHION, "--quick", "--trials", "tf:tpu", "--tpu-fallback", "mirrored", "--tpu-type", "v4-8"
    )
    assert code == 0, summary
    (trial,) = summary["trials"]
    assert trial["trial"] == "tf:mirrored x1 (asked tf:tpu)"
    assert trial["strategy"] == "mirrored" and trial["requested_strategy"] == "tpu"
    assert trial["val_accuracy"] > 0.6
    run = client.get_run(trial["run_id"])
    tags, params = run.data.tags, run.data.params
    assert run.info.run_name == "tf:mirrored x1 (asked tf:tpu)"
    assert tags["requested_strategy"] == "tpu" and tags["actual_strategy"] == "mirrored"
    assert tags["strategy_class"] == "MirroredStrategy" and "no TPU on" in tags["fallback_reason"]
    assert params["strategy"] == "mirrored" and params["requested_strategy"] == "tpu"
    assert params["global_batch"] == "32"  # one CPU replica ran, not the 4 chips that were asked for
    # Scheduled through Ray's TPU resources: the worker held the host's 4 chips and the slice head.
    assert "TPU=4" in tags["ray_resources"] and "TPU-v4-8-head=1" in tags["ray_resources"]
    assert tags["worker_node_ids"] == node_ids["tpu"][:12]
    rows = [r for r in child_runs(client, summary)]
    assert [r.info.run_name for r in rows] == ["tf:mirrored x1 (asked tf:tpu)"]


def test_concurrent_trials_hold_whole_nodes_of_their_own(side_by_side, cluster):
    """--concurrency auto on 3 one-CPU nodes: trials run side by side, each pinned to the nodes it holds (a
    2-worker trial holds two), no two trials that overlapped in time share a node, every trial FINISHED."""
    _, node_ids = cluster
    short = {n[:12] for n in node_ids.values()}
    code, summary, client = side_by_side.code, side_by_side.summary, side_by_side.client
    assert code == 0, summary
    assert client.get_run(summary["parent_run_id"]).data.params["concurrency"] == "3"
    spans = {}
    for trial in summary["trials"]:
        assert trial["status"] == "FINISHED" and trial["val_accuracy"] > 0.6
        tags = client.get_run(trial["run_id"]).data.tags
        held = set(tags["node_ids_held"].split(","))
        assert held <= short and len(held) == (2 if trial["workers"] == 2 else 1), tags["node_ids_held"]
        assert set(tags["worker_node_ids"].split(",")) <= held  # its workers ran only on the nodes it held
        assert trial["nodes_held"] == len(held)
        spans[trial["trial"]] = (float(tags["trial_started"]), float(tags["trial_ended"]), held, tags)
    overlapped = 0
    names = list(spans)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            (a0, a1, na, ta), (b0, b1, nb, tb) = spans[a], spans[b]
            if a0 < b1 and b0 < a1:
                overlapped += 1
                assert not na & nb, (a, b, na, nb)
                assert b in ta["overlapped_with"].split(",") and a in tb["overlapped_with"].split(",")
                assert ta["shared_machine"] == "true"  # simulated nodes: one machine's cores
    assert overlapped >= 1
    out = side_by_side.out
    assert "up to 3 trials at a time" in out and "ran at the same time" in out
