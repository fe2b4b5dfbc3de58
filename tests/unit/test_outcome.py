"""raylab.driver.outcome.recorded: every way a child run's body can end, against a real MLflow sqlite store."""

from __future__ import annotations

import pytest

from raylab.config import TrialSpec
from raylab.driver.outcome import TrialOutcome, recorded
from raylab.record.tracking import Tracker


def start(mlflow_uri):
    tracker = Tracker(mlflow_uri, "exp")
    run_id = tracker.start_run("tf:none x1", {}, {})
    return tracker, TrialOutcome(TrialSpec("tf", "none", 1), run_id, "FAILED")


def test_body_returns_finished(mlflow_uri):
    tracker, outcome = start(mlflow_uri)
    calls = []
    with recorded(outcome, tracker, before_end=lambda: calls.append("before"), after_end=lambda: calls.append("after")):
        calls.append("body")
    assert outcome.status == "FINISHED" and outcome.error is None and calls == ["body", "before", "after"]
    assert tracker.client.get_run(outcome.run_id).info.status == "FINISHED"


def test_body_raises_failed_recorded_and_swallowed(mlflow_uri, capsys):
    """A failing trial is FAILED with its traceback in a tag, said on stderr, and the caller goes on."""
    tracker, outcome = start(mlflow_uri)
    with recorded(outcome, tracker):
        raise RuntimeError("boom")
    run = tracker.client.get_run(outcome.run_id)
    assert outcome.status == "FAILED" and "RuntimeError: boom" in outcome.error
    assert run.info.status == "FAILED" and run.data.tags["error_summary"] == "RuntimeError: boom"
    assert "[tf:none x1] FAILED: RuntimeError: boom" in capsys.readouterr().err


def test_interrupt_killed_and_raised(mlflow_uri):
    tracker, outcome = start(mlflow_uri)
    with pytest.raises(KeyboardInterrupt):
        with recorded(outcome, tracker):
            raise KeyboardInterrupt
    assert outcome.status == "KILLED" and tracker.client.get_run(outcome.run_id).info.status == "KILLED"


def test_run_ends_even_when_before_end_fails(mlflow_uri):
    """A cleanup that raises (e.g. a dead cluster) must not leave the run RUNNING, nor skip after_end."""
    tracker, outcome = start(mlflow_uri)
    after = []

    def broken():
        raise ConnectionError("cluster gone")

    with pytest.raises(ConnectionError):
        with recorded(outcome, tracker, before_end=broken, after_end=lambda: after.append(True)):
            pass
    assert tracker.client.get_run(outcome.run_id).info.status == "FINISHED" and after == [True]


def test_system_exit_inside_fit_counts_as_interrupt(mlflow_uri):
    """Ray Train's SIGINT handler, installed by fit(), can sys.exit(0): the run is KILLED, not FAILED."""
    tracker, outcome = start(mlflow_uri)
    with pytest.raises(SystemExit):
        with recorded(outcome, tracker):
            raise SystemExit(0)
    assert outcome.status == "KILLED" and tracker.client.get_run(outcome.run_id).info.status == "KILLED"
