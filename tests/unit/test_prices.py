"""What a trial cost (--prices): a price per node type, the nodes it held, its wall time and time to target; the
cheapest trial to the target, with its interval over the repeats."""

from __future__ import annotations

import json

import pytest

from raylab.compare import ranking, stats, table
from raylab.errors import UserError
from raylab.record.prices import SIMULATED, WHOLE, cost, node_type, read_prices
from tests.unit.test_stats import row


def test_a_price_file_is_read_and_a_bad_one_refused_at_the_door(tmp_path):
    good = tmp_path / "prices.json"
    good.write_text(json.dumps({"cpu": 0.1, "H200": 3.72}))
    assert read_prices(good) == {"cpu": 0.1, "H200": 3.72} and read_prices(None) is None
    for text, words in [
        ("{", "is not JSON"),
        ("[]", "node type -> US dollars"),
        ('{"cpu": -1}', "numbers >= 0"),
        ('{"cpu": "cheap"}', "numbers >= 0"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(UserError, match=words):
            read_prices(bad)
    with pytest.raises(UserError, match="missing.json"):
        read_prices(tmp_path / "missing.json")


def test_a_trial_costs_its_wall_time_on_the_nodes_it_held():
    gpu = {"CPU": 16, "GPU": 1, "accelerator_type:H200": 1}
    assert node_type(gpu) == "H200" and node_type({"CPU": 2}) == "cpu"
    metrics, tags = cost({"cpu": 0.1, "H200": 3.6}, [gpu, {"CPU": 2}], {"wall_s": 360.0, "time_to_target_s": 36.0})
    assert metrics == pytest.approx({"price_usd_per_hour": 3.7, "cost_usd": 0.37, "cost_to_target_usd": 0.037})
    assert tags == {"node_types": "H200,cpu", "cost_split": WHOLE}
    metrics, tags = cost({"cpu": 0.1}, [gpu], {"wall_s": 360.0})
    assert metrics == {} and tags == {"cost": "not counted: --prices has no price for H200"}


def test_the_comparison_names_the_cheapest_trial_to_target_with_its_interval():
    rows = [row("a:x x1", 100, time_to_target_s=t, cost_to_target_usd=c) for t, c in ((10, 0.010), (11, 0.011))] + [
        row("b:x x1", 50, time_to_target_s=t, cost_to_target_usd=c) for t, c in ((12, 0.004), (13, 0.0041))
    ]
    lines = ranking.answer(stats.fold(rows))
    assert len(lines) == 2 and lines[-2].startswith("fastest to target: a:x x1, 10.5 s (reached in 2 of 2 repeat(s))")
    assert lines[-1].startswith(
        "cheapest to target: b:x x1, $0.00405 (reached in 2 of 2 repeat(s)); 2.59x cheaper than a:x x1, $0.0105 (95% CI"
    ), lines[-1]
    assert lines[-1].endswith("Welch's t on log dollars)")


def test_the_report_says_how_each_trial_was_billed():
    """A node is held by one trial at a time (tests/unit/test_matrix.py), so a trial pays its nodes whole; on a
    simulated cluster, whose nodes are one machine's, they are priced as what they stand for: said either way."""
    _, tags = cost({"cpu": 3.6}, [{"CPU": 2}], {"wall_s": 10.0}, simulated=True)
    assert tags == {"node_types": "cpu", "cost_split": SIMULATED}
    rows = [
        row("a:x x1", 100, cost_usd=0.01, cost_split=SIMULATED),
        row("b:x x1", 100, cost_usd=0.02),
        row("c:x x1", 100, cost_split=WHOLE),
    ]
    report = table.format_report(rows)
    assert f"cost (--prices): how each trial was billed:\n  {SIMULATED}: a:x x1\n  {WHOLE}: b:x x1\n" in report
