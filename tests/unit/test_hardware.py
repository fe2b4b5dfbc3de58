"""Hardware as an axis (--device cpu,gpu, --accelerator-type): which nodes a trial of each hardware item takes, how
the table and the parity report show the axis, and the comparison's answer, last."""

from __future__ import annotations

from raylab.compare import parity, runs, table
from raylab.driver.matrix import Need, Node, Nodes, plan
from tests.unit.test_stats import row

CPU = {"CPU": 4.0}
T4 = {"CPU": 4.0, "GPU": 1.0, "accelerator_type:T4": 1.0}
L4 = {"CPU": 4.0, "GPU": 1.0, "accelerator_type:L4": 1.0}


def test_a_trial_of_a_type_takes_a_node_of_that_type_and_a_cpu_trial_leaves_accelerators_alone():
    nodes = [Node("t4", T4), Node("l4", L4), Node("cpu", CPU)]
    assert [n.id for n in plan(nodes, 1, {"CPU": 1, "GPU": 0, "accelerator_type:L4": 0.001})] == ["l4"]
    assert [n.id for n in plan(nodes, 1, {"CPU": 1, "GPU": 1})] == ["t4"]  # any GPU node, in Ray's order
    assert [n.id for n in plan(nodes, 1, {"CPU": 1, "GPU": 0})] == ["cpu"]  # not the GPU nodes listed first
    assert plan(nodes[:2], 1, {"CPU": 1, "accelerator_type:A100": 0.001}) is None
    # With no plain CPU node free, a CPU trial still runs: on the CPUs of an accelerator node
    free = Nodes(nodes, limit=3)
    assert [n.id for n in free.take(_need(1, {"CPU": 1}), "first")] == ["cpu"]
    assert [n.id for n in free.take(_need(1, {"CPU": 1}), "second")] == ["t4"]


def _need(workers, per_worker):
    return Need(workers, per_worker)


def swept_rows():
    common = {"node_types": None, "precision_applied": "fp32"}
    return [
        row("torch:none x1 on cpu:T4", 100, hardware="cpu:T4", time_to_target_s=t, cost_to_target_usd=c, **common)
        for t, c in ((10, 0.010), (11, 0.011))
    ] + [
        row("torch:none x1 on cpu:L4", 50, hardware="cpu:L4", time_to_target_s=t, cost_to_target_usd=c, **common)
        for t, c in ((12, 0.004), (13, 0.0041))
    ]


def test_the_table_and_the_parity_report_show_a_swept_axis_not_a_mismatch():
    report = table.format_report(swept_rows())
    header = report.splitlines()[0].split()
    assert header[:2] == ["trial", "hardware"]
    assert "cpu:T4" in report.splitlines()[2] and "cpu:L4" in report.splitlines()[3]
    assert "parity: fair" in report
    assert "    hardware (swept, the axis compared): cpu:T4, cpu:L4\n" in report
    # the answer comes last: the fastest and the cheapest to the target, each with its interval
    last = report.splitlines()[-3:]
    assert last[0] == "the answer, to the recipe's target:"
    assert last[1].startswith("  fastest to target: torch:none x1 on cpu:T4, 10.5 s")
    assert last[2].startswith("  cheapest to target: torch:none x1 on cpu:L4, $0.00405") and "95% CI" in last[2]
    # one hardware: no column, one parity line
    one = table.format_report([r for r in swept_rows() if r["hardware"] == "cpu:T4"])
    assert "hardware" not in one.splitlines()[0] and "    hardware: cpu:T4" in one


def test_what_a_trial_ran_on_is_read_from_the_nodes_it_held():
    assert runs.hardware_of({"device": "cpu"}, {"node_types": "cpu,T4"}) == "cpu"
    assert runs.hardware_of({"device": "gpu", "accelerator_type": "T4"}, {"node_types": "T4"}) == "gpu:T4"
    assert runs.hardware_of({"device": "cpu", "accelerator_type": "T4"}, {}) == "cpu:T4?"  # never recorded
    assert runs.hardware_of({"device": "cpu"}, {"device_kind": "xla:tpu"}) == "tpu"
    lines, mismatches = parity.parity(swept_rows())
    assert "hardware" not in " ".join(mismatches)
