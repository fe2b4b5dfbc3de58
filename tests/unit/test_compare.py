"""raylab.compare.table and `raylab compare`, reading back a real MLflow sqlite store."""

from __future__ import annotations

import csv
import io
import json
import time

import pytest

from raylab import cli
from raylab.compare.runs import find_parent
from raylab.compare.table import compare
from raylab.record.tracking import Tracker
from raylab.errors import UserError

RESULTS = {
    "tf:none x1": dict(
        samples_per_sec=1234.4,
        step_time_p50_ms=25.0,
        step_time_p90_ms=31.0,
        startup_s=12.3,
        first_step_s=1.5,
        wall_s=88.0,
        val_accuracy=0.8765,
        val_loss=0.35,
    ),
    "torch:ddp x2": dict(
        samples_per_sec=2345.6,
        step_time_p50_ms=26.0,
        step_time_p90_ms=35.0,
        startup_s=9.8,
        first_step_s=0.4,
        wall_s=60.0,
        val_accuracy=0.8712,
        val_loss=0.36,
    ),
}
ERROR = 'Traceback (most recent call last):\n  File "worker.py", line 1\nRuntimeError: NCCL exploded'


def populate(tracker: Tracker) -> str:
    """One invocation: a parent, two finished trials and a failed one; returns the parent id."""
    parent = tracker.start_run("fashion run", {"epochs": 1}, {})
    for name in ["tf:none x1", "torch:ddp x2", "tf:mwms x2"]:
        time.sleep(0.01)  # distinct start times keep the trial order stable
        kind, workers = name.split(" x")
        fw, st = kind.split(":")
        run = tracker.start_run(name, {"framework": fw, "strategy": st, "workers": workers}, {}, parent=parent)
        if name in RESULTS:
            tracker.log_metrics(run, RESULTS[name])
            tracker.end(run, "FINISHED")
        else:
            tracker.end(run, "FAILED", ERROR)
    tracker.end(parent, "FAILED")
    return parent


@pytest.fixture
def store(mlflow_uri):
    tracker = Tracker(mlflow_uri, "exp")
    return tracker, populate(tracker)


def test_table_lists_trials_failure_and_logs_chart(store, tmp_path):
    """The table shows every trial with its figures formatted and the failed trial's error; the chart is the parent's
    artifact."""
    tracker, parent = store
    chart = tmp_path / "chart.png"
    text = compare(tracker, "exp", None, "table", chart)
    for name in ("tf:none x1", "torch:ddp x2", "tf:mwms x2"):
        assert name in text
    assert "samples/s" in text and "1,234" in text and "0.8765" in text
    assert "failed:\n  tf:mwms x2: RuntimeError: NCCL exploded" in text
    assert parent in text and str(chart) in text
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [a.path for a in tracker.client.list_artifacts(parent)] == ["chart.png"]


def test_table_rows_in_trial_order(store):
    """Trials appear in the order they ran, failed ones with '-' for missing figures."""
    tracker, _ = store
    lines = compare(tracker, "exp", None, "table", None).splitlines()
    body = [line for line in lines if line.startswith(("tf:", "torch:"))]
    assert [line.split("  ")[0].strip() for line in body] == ["tf:none x1", "torch:ddp x2", "tf:mwms x2"]
    assert body[2].split()[2:4] == ["FAILED", "-"]


def test_csv(store):
    """CSV has one row per trial with params, status, metrics and the error summary."""
    tracker, _ = store
    rows = list(csv.DictReader(io.StringIO(compare(tracker, "exp", None, "csv", None))))
    assert [r["trial"] for r in rows] == ["tf:none x1", "torch:ddp x2", "tf:mwms x2"]
    assert [r["status"] for r in rows] == ["FINISHED", "FINISHED", "FAILED"]
    assert float(rows[1]["samples_per_sec"]) == pytest.approx(2345.6) and rows[1]["framework"] == "torch"
    assert rows[2]["error"] == "RuntimeError: NCCL exploded" and rows[2]["samples_per_sec"] == ""


def test_json(store):
    """JSON carries the experiment, the parent run id and every trial's figures."""
    tracker, parent = store
    doc = json.loads(compare(tracker, "exp", None, "json", None))
    assert doc["experiment"] == "exp" and doc["parent_run_id"] == parent
    by_name = {t["trial"]: t for t in doc["trials"]}
    assert by_name["tf:none x1"]["step_time_p90_ms"] == pytest.approx(31.0)
    assert by_name["torch:ddp x2"]["workers"] == 2 and by_name["torch:ddp x2"]["strategy"] == "ddp"
    assert by_name["tf:mwms x2"]["status"] == "FAILED" and by_name["tf:mwms x2"]["val_accuracy"] is None


def test_find_parent_latest_or_asked_for(store, mlflow_uri):
    """The latest parent wins by default; a given id is honoured; other experiments' runs are refused."""
    tracker, first = store
    time.sleep(0.01)
    second = tracker.start_run("fashion later", {}, {})
    assert find_parent(tracker.client, "exp")[1].info.run_id == second
    assert find_parent(tracker.client, "exp", first)[1].info.run_id == first
    other = Tracker(mlflow_uri, "other")
    stranger = other.start_run("elsewhere", {}, {})
    with pytest.raises(UserError, match="is not in experiment 'exp'"):
        find_parent(tracker.client, "exp", stranger)
    Tracker(mlflow_uri, "empty")
    with pytest.raises(UserError, match="has no raylab runs yet"):
        find_parent(tracker.client, "empty")


def test_cli_compare_unknown_experiment_exit_2(store, mlflow_uri, capsys):
    """`raylab compare` on an unknown experiment exits 2 with one error line."""
    assert cli.main(["compare", "--experiment", "nope", "--tracking-uri", mlflow_uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("raylab: error: no MLflow experiment named 'nope'") and "Traceback" not in err


def test_cli_compare_missing_store_exit_2(tmp_path, capsys):
    """`raylab compare` against a sqlite file that does not exist exits 2 and creates nothing."""
    uri = f"sqlite:///{tmp_path / 'none.db'}"
    assert cli.main(["compare", "--experiment", "exp", "--tracking-uri", uri]) == 2
    assert "no MLflow store" in capsys.readouterr().err and not (tmp_path / "none.db").exists()


def test_cli_compare_csv_ok(store, mlflow_uri, capsys, tmp_path):
    """`raylab compare --format csv` prints the trials and writes no chart."""
    assert cli.main(["compare", "--experiment", "exp", "--tracking-uri", mlflow_uri, "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("trial,framework,strategy,requested_strategy,workers,status")
    assert not list(tmp_path.glob("*.png"))


def test_chart_has_accuracy_against_wall_time(store, tmp_path):
    """curves() reads each finished trial's test accuracy per epoch against its elapsed_s; the chart draws
    them under the bars (a taller PNG than the bars alone)."""
    from raylab.compare.runs import curves, trial_rows
    from raylab.compare.table import write_chart

    tracker, parent = store
    rows = trial_rows(tracker.client, tracker.experiment_id, parent)
    for i, row in enumerate(r for r in rows if r["status"] == "FINISHED"):
        for epoch in (1, 2, 3):
            tracker.log_metrics(
                row["run_id"], {"elapsed_s": 10.0 * epoch + i, "val_accuracy": 0.5 + 0.1 * epoch}, step=epoch
            )
    lines = curves(tracker.client, rows)
    assert [c["trial"] for c in lines] == ["tf:none x1", "torch:ddp x2"]  # the failed trial has no curve
    assert lines[0]["metric"] == "val_accuracy"
    assert [x for x, _ in lines[1]["points"]] == [11.0, 21.0, 31.0]
    assert [round(y, 3) for _, y in lines[1]["points"]][-1] == 0.8  # the last logged value, at epoch 3
    from PIL import Image

    bars, both = tmp_path / "bars.png", tmp_path / "both.png"
    write_chart(rows, bars, "t")
    write_chart(rows, both, "t", lines)
    assert Image.open(both).size[1] > Image.open(bars).size[1] + 300


def test_an_input_bound_trial_is_flagged():
    from raylab.compare.table import format_table

    rows = [
        {"trial": "torch:ddp x2", "status": "FINISHED", "samples_per_sec": 900.0, "input_wait_share": 0.35},
        {"trial": "tf:none x1", "status": "FINISHED", "samples_per_sec": 1500.0, "input_wait_share": 0.02},
        {
            "trial": "tf:mwms x2",
            "status": "FINISHED",
            "samples_per_sec": 1400.0,
            "input_timing": "in the framework's graph",
        },
    ]
    table = format_table(rows)
    assert "input wait" in table and "35%" in table and "2%" in table
    assert table.splitlines()[4].endswith("in graph"), table  # read inside the step's graph: said, not a blank
    assert "torch:ddp x2 !" in table and "tf:none x1 !" not in table
    assert "! input-bound: its steps waited for input 35% of their time (torch:ddp x2)" in table


def test_peak_memory_is_the_largest_rank_and_every_rank_is_kept():
    from raylab.compare.table import format_table
    from raylab.record.figures import peak_memory

    assert peak_memory([812.4, None, 1530.0]) == ({"peak_rss_mb": 1530.0}, {"peak_rss_mb_by_rank": "812,?,1530"})
    assert peak_memory([None]) == ({}, {})  # nothing reported (an older worker): nothing claimed
    rows = [
        {"trial": "torch:ddp x2", "status": "FINISHED", "samples_per_sec": 900.0, "peak_rss_mb": 1530.0},
        {"trial": "tf:none x1", "status": "FINISHED", "samples_per_sec": 1500.0, "peak_rss_mb": 2571.6},
    ]
    table = format_table(rows)
    assert "peak RSS MB" in table and "1,530" in table and "2,572" in table


def test_without_run_it_is_the_callers_own_latest_invocation_on_a_store_two_users_write_to(
    mlflow_uri, monkeypatch, capsys
):
    """Two users write to one store; each `raylab compare` without --run shows their own latest, says whose, and
    --user picks another's."""
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.setenv("LOGNAME", "alice")
    alice = populate(Tracker(mlflow_uri, "exp"))
    time.sleep(0.01)
    monkeypatch.setenv("LOGNAME", "bob")
    bob = Tracker(mlflow_uri, "exp").start_run("bob's later run", {}, {})  # the experiment's latest: bob's
    assert Tracker(mlflow_uri, "exp").client.get_run(bob).data.tags["mlflow.user"] == "bob"
    monkeypatch.setenv("LOGNAME", "alice")
    assert cli.main(["compare", "--experiment", "exp", "--tracking-uri", mlflow_uri, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["parent_run_id"] == alice and shown["user"] == "alice"
    assert cli.main(["compare", "--experiment", "exp", "--tracking-uri", mlflow_uri, "--chart", "c.png"]) == 0
    assert f"({alice}), the latest invocation of yours (alice; --user or --run for another)" in capsys.readouterr().out
    assert (
        cli.main(["compare", "--experiment", "exp", "--tracking-uri", mlflow_uri, "--user", "bob", "--format", "json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["parent_run_id"] == bob
    monkeypatch.setenv("LOGNAME", "carol")  # no invocation of hers: one sentence naming whose is latest and the flags
    assert cli.main(["compare", "--experiment", "exp", "--tracking-uri", mlflow_uri]) == 2
    err = capsys.readouterr().err
    assert "no invocation of user 'carol'" in err and "--user bob" in err and "Traceback" not in err


def test_a_store_that_cannot_take_the_chart_still_prints_the_comparison_and_says_why(mlflow_uri, capsys, tmp_path):
    """A tracking server's sqlite file opened directly: its runs' artifacts live at mlflow-artifacts:/ URIs that only
    the server can write. The comparison prints, the chart is on disk, and the line says why it was not logged."""
    tracker = Tracker(mlflow_uri, "exp")
    tracker.client.create_experiment("served", artifact_location="mlflow-artifacts:/served")
    populate(Tracker(mlflow_uri, "served"))
    assert (
        cli.main(
            ["compare", "--experiment", "served", "--tracking-uri", mlflow_uri, "--chart", str(tmp_path / "c.png")]
        )
        == 0
    )
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "parity:" in out.out
    assert "not logged as an artifact of the parent run" in out.out and "--tracking-uri" in out.out
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_the_charts_bars_start_at_zero_and_a_framework_has_one_colour_and_one_order():
    """What the chart draws, read as data (raylab/compare/chart.py chart_data): every panel's bars from zero, the
    accuracy too; one colour a framework in the bars, the legend and the curves; the legend in the bars' order;
    the marks of a figure too short to time and of one measured beside other work on its bar."""
    from raylab.compare.chart import chart_data
    from raylab.registry import frameworks

    def r(trial, sps, acc, **more):
        return {
            "trial": trial,
            "framework": trial.split(":")[0],
            "status": "FINISHED",
            "samples_per_sec": sps,
            "step_time_p50_ms": 1.0,
            "step_time_p90_ms": 1.5,
            "val_accuracy": acc,
            **more,
        }

    rows = [
        r("torch:none x1", 30000, 0.86, steady_s=9.0),
        r("jax:none x1", 40000, 0.87, steady_s=2.0),
        r("torch:ddp x2", 20000, 0.85, steady_s=9.0, beside_cores=0.9),
        r("tf:none x1", 50000, 0.87, steady_s=9.0),
    ]
    lines = [
        {"trial": t, "framework": t.split(":")[0], "metric": "val_accuracy", "points": [(1.0, 0.8)]}
        for t in ("torch:none x1", "torch:ddp x2", "tf:none x1")
    ]
    data = chart_data(rows, lines)
    assert all(p["xlim"][0] == 0.0 for p in data["panels"] + data["more"])  # from zero, accuracy included
    assert data["panels"][2]["xlim"] == (0.0, 1.0)
    color = {fw.name: fw.color for fw in frameworks()}
    assert data["colors"] == [color["torch"], color["jax"], color["torch"], color["tf"]]
    assert data["legend"] == [
        (fw.title, fw.color) for name in ("torch", "jax", "tf") for fw in frameworks() if fw.name == name
    ]  # the bars' order, top to bottom
    assert [c["color"] for c in data["curves"]] == [color["torch"], color["torch"], color["tf"]]
    assert data["curves"][0]["style"] != data["curves"][1]["style"]  # two torch trials told apart by line style
    assert data["names"] == ["torch:none x1", "jax:none x1 ~", "torch:ddp x2 ^", "tf:none x1"]
    assert data["panels"][2]["label"] == "test accuracy"
    timed = chart_data([{**row, "seconds": "5.0"} for row in rows], lines)  # --seconds: accuracy after unequal steps
    assert timed["panels"][2]["label"] == "test accuracy (each after its own steps: --seconds)"
