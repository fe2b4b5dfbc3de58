"""raylab.record.tracking.Tracker against a real MLflow sqlite store."""

from __future__ import annotations

import pytest

from raylab.record.tracking import MAX_TAG, PARENT, ROLE, Tracker
from raylab.errors import UserError


def test_creates_then_reuses_experiment(mlflow_uri):
    """A new experiment name is created; opening it again returns the same experiment."""
    first = Tracker(mlflow_uri, "exp")
    assert first.client.get_experiment_by_name("exp").experiment_id == first.experiment_id
    assert Tracker(mlflow_uri, "exp").experiment_id == first.experiment_id
    assert Tracker(mlflow_uri).experiment_id is None


def test_parent_and_child_runs(mlflow_uri):
    """The parent is tagged role=parent; a child carries mlflow.parentRunId and role=trial."""
    t = Tracker(mlflow_uri, "exp")
    parent = t.start_run("fashion now", {"epochs": 1}, {"git_commit": "abc"})
    child = t.start_run("tf:none x1", {"workers": 1}, {"git_commit": "abc"}, parent=parent)
    p, c = t.client.get_run(parent), t.client.get_run(child)
    assert p.data.tags[ROLE] == "parent" and PARENT not in p.data.tags and p.data.params == {"epochs": "1"}
    assert c.data.tags[ROLE] == "trial" and c.data.tags[PARENT] == parent and c.data.tags["git_commit"] == "abc"
    assert c.info.run_name == "tf:none x1" and c.info.experiment_id == t.experiment_id
    assert c.info.status == "RUNNING"


def test_log_params_batches_past_mlflow_limit(mlflow_uri):
    """250 params (MLflow takes 100 per batch) are all logged."""
    t = Tracker(mlflow_uri, "exp")
    params = {f"p{i:03d}": i for i in range(250)}
    run = t.start_run("many", params, {})
    assert t.client.get_run(run).data.params == {k: str(v) for k, v in params.items()}


def test_log_metrics_with_steps(mlflow_uri):
    """Metrics are logged at their step; None values are skipped."""
    t = Tracker(mlflow_uri, "exp")
    run = t.start_run("r", {}, {})
    t.log_metrics(run, {"val_accuracy": 0.5, "missing": None}, step=1)
    t.log_metrics(run, {"val_accuracy": 0.75}, step=2)
    history = t.client.get_metric_history(run, "val_accuracy")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.5), (2, 0.75)]
    assert "missing" not in t.client.get_run(run).data.metrics


def test_end_failed_records_error(mlflow_uri):
    """end(FAILED, error) sets the status, the full error and its last line as error_summary."""
    t = Tracker(mlflow_uri, "exp")
    run = t.start_run("r", {}, {})
    error = "Traceback (most recent call last):\n" + "  frame\n" * 2000 + "RuntimeError: boom\n"
    t.end(run, "FAILED", error)
    r = t.client.get_run(run)
    assert r.info.status == "FAILED" and r.info.end_time is not None
    assert r.data.tags["error_summary"] == "RuntimeError: boom"
    assert r.data.tags["error"] == error[:MAX_TAG]  # long tracebacks are cut to fit MLflow's tag limit


def test_end_finished_without_error(mlflow_uri):
    """end(FINISHED) sets the status and adds no error tags."""
    t = Tracker(mlflow_uri, "exp")
    run = t.start_run("r", {}, {})
    t.end(run, "FINISHED")
    r = t.client.get_run(run)
    assert r.info.status == "FINISHED" and "error" not in r.data.tags


def test_deleted_experiment_is_a_user_error(mlflow_uri):
    """A deleted experiment is refused with a hint to restore it."""
    t = Tracker(mlflow_uri, "gone")
    t.client.delete_experiment(t.experiment_id)
    with pytest.raises(UserError, match="'gone' is deleted"):
        Tracker(mlflow_uri, "gone")


def test_sqlite_in_missing_directory_is_a_user_error(tmp_path):
    """A sqlite store in a directory that does not exist is a UserError naming the directory."""
    with pytest.raises(UserError) as e:
        Tracker(f"sqlite:///{tmp_path / 'nope' / 'mlflow.db'}", "exp")
    assert "does not exist" in str(e.value) and str(tmp_path / "nope") in str(e.value)
    assert not (tmp_path / "nope").exists()


def test_ui_hint(mlflow_uri):
    """The UI hint names the store and the experiment."""
    t = Tracker(mlflow_uri, "exp")
    assert mlflow_uri in t.ui_hint("exp") and "'exp'" in t.ui_hint("exp")


def test_error_summary_completes_a_headline_that_ends_in_a_colon():
    from raylab.record.tracking import error_summary

    text = (
        "Traceback (most recent call last):\n  File x\nray.train.WorkerGroupError: Training failed due to "
        "worker errors:\n[Rank 0 Error Snippet]:\nA worker health check failed.\nWorker info: x\n"
        "The actor died unexpectedly before finishing this task.\n\tclass_name: RayTrainWorker"
    )
    assert error_summary(text) == (
        "ray.train.WorkerGroupError: Training failed due to worker errors: "
        "[Rank 0 Error Snippet]: A worker health check failed. "
        "The actor died unexpectedly before finishing this task."
    )
