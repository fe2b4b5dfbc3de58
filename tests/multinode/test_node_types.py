"""Hardware as an axis on the simulated multi-node cluster (tests/multinode/conftest.py: nodes of two accelerator
types), in the default tier: one invocation runs a trial on each node type, prices it, and answers which is fastest
and cheapest to the target; a type no node has is refused before any worker starts. (Workers across nodes, the TPU
host and --concurrency: test_multinode.py, full tier.)"""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.conftest import shared_run
from tests.multinode.conftest import load_recipe

pytestmark = pytest.mark.multinode
TIER = "full"  # the default tier's: tests/unit/test_hardware.py (the axis's scheduling, table and report)
RAY_TRAIN_STARTS = 0  # the trials on two types are the shared run's; the refused one starts none
SECONDS = 110

FASHION = load_recipe("fashion")


@pytest.fixture(scope="module")
def two_types(cluster, tmp_path_factory, template_db):
    """One invocation across two node types (--accelerator-type T4,TPU-V4: the CPUs of each), priced, twice each,
    side by side; a target the quick run reaches, so that time and cost to it are measured."""
    where = tmp_path_factory.mktemp("two-types")
    prices = where / "prices.json"
    prices.write_text(json.dumps({"cpu": 0.05, "T4": 0.35, "TPU-V4": 3.22}))
    return shared_run(
        where,
        template_db,
        "multinode-two-types",
        4,
        FASHION,
        "--quick",
        "--trials",
        "torch:none",
        "--accelerator-type",
        "T4,TPU-V4",
        "--prices",
        str(prices),
        "--concurrency",
        "auto",
        "--repeats",
        "2",
        "--set",
        "target_accuracy=0.5",
        seconds=110,
    )


def test_one_invocation_runs_each_trial_on_each_node_type_and_prices_it(two_types, cluster):
    """Each trial runs on a node of its type only (its name, its params and the nodes it held say which); the table
    shows the axis, the parity report calls it swept, not a mismatch; each is priced at its node's rate; the
    report ends with the fastest and the cheapest trial to the target, each with its interval."""
    _, node_ids = cluster
    code, summary, client, out = two_types.code, two_types.summary, two_types.client, two_types.out
    assert code == 0, (summary, out[-3000:])
    where = {"T4": node_ids["cpu"][:12], "TPU-V4": node_ids["tpu"][:12]}
    rate = {"T4": 0.35, "TPU-V4": 3.22}
    names = sorted({t["trial"] for t in summary["trials"]})
    assert names == ["torch:none x1 on cpu:T4", "torch:none x1 on cpu:TPU-V4"], names
    for trial in summary["trials"]:
        kind = trial["trial"].rsplit(":", 1)[1]
        run = client.get_run(trial["run_id"])
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        assert run.info.status == "FINISHED" and params["accelerator_type"] == kind and params["device"] == "cpu"
        assert tags["node_types"] == kind and tags["node_ids_held"] == where[kind] == tags["worker_node_ids"]
        assert metrics["price_usd_per_hour"] == rate[kind]
        assert metrics["cost_usd"] == pytest.approx(metrics["wall_s"] * rate[kind] / 3600, rel=0.01)
        assert metrics["cost_to_target_usd"] <= metrics["cost_usd"]
    parent = client.get_run(summary["parent_run_id"]).data.params
    assert parent["device"] == "cpu:T4,cpu:TPU-V4"
    header = next(line for line in out.splitlines() if line.startswith("trial ") and " status " in line)
    assert header.split()[1] == "hardware", header
    assert "parity: fair" in out and "hardware (swept, the axis compared)" in out
    answer = [line.strip() for line in out.split("the answer, to the recipe's target:")[1].strip().splitlines()]
    # a trial's repeats may start cold and warm (a warm group): the answer compares like runs and says which
    assert re.match(r"fastest to target( \([^)]*\))?: torch:none x1 on cpu:", answer[0]) and "95% CI" in answer[0]
    # the T4 node's rate is a tenth of the TPU host's on one CPU each: the cheapest is the T4 one
    assert re.match(r"cheapest to target( \([^)]*\))?: torch:none x1 on cpu:T4", answer[1]) and "95% CI" in answer[1]


def test_an_accelerator_type_no_node_has_is_refused_before_any_worker_starts(run_recipe, cluster, capsys):
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:none", "--device", "cpu,cpu:A100")
    assert code == 2 and summary is None
    err = capsys.readouterr().err
    assert (
        "torch:none x1 on cpu:A100 asks for nodes of accelerator type A100, but no node of the Ray cluster has "
        "one (its types: T4, TPU-V4)"
    ) in err, err
    assert not client.search_runs([e.experiment_id for e in client.search_experiments()])  # nothing recorded
