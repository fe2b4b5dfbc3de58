"""Every trial kind trains the Fashion-MNIST subset on a real local Ray cluster, 1 and 2 workers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")
EXPECTED_CLASS = {
    "tf:none": "_DefaultDistributionStrategy",
    "tf:mirrored": "MirroredStrategy",
    "tf:mwms": "CollectiveAllReduceStrategy",  # the class behind tf.distribute.MultiWorkerMirroredStrategy
    "torch:none": "none",
    "torch:ddp": "DistributedDataParallel",
}


def most_reads(steps: int, window: int) -> int:
    """Host reads an epoch may make: one per window, plus the first step's and the warm-up's own windows."""
    return math.ceil(steps / window) + 2


# The distributed strategies on 2 workers only, to keep the suite inside its time budget: x1 is the
# same code with one replica (tf:mirrored x1 runs in test_recipes' mnist test, torch:ddp x1 in e2e).
# torch:none reads back after every step (--step-latency); the others use the default window.
@pytest.mark.parametrize("kind,workers", [("tf:none", "1"), ("tf:mirrored", "2"), ("tf:mwms", "2"),
                                          ("torch:none", "1"), ("torch:ddp", "2")])
def test_trial_kind_trains_and_is_recorded(run_recipe, kind, workers):
    """Each trial learns (loss below chance, accuracy well above it), MLflow records what ran, and the loop
    reads back to the host once per window (every step only when --step-latency asks)."""
    latency = ["--step-latency"] if kind == "torch:none" else []
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", kind, "--workers", workers, *latency)
    assert code == 0
    counts = [int(w) for w in workers.split(",")]
    assert [t["workers"] for t in summary["trials"]] == counts
    children = client.search_runs([client.get_run(summary["parent_run_id"]).info.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{summary['parent_run_id']}'")
    assert len(children) == len(counts)  # one child per trial, never one per rank
    for trial in summary["trials"]:
        assert trial["status"] == "FINISHED"
        assert trial["val_accuracy"] > 0.6
        assert trial["samples_per_sec"] > 0 and trial["step_time_p90_ms"] >= trial["step_time_p50_ms"] > 0
        assert 0 < trial["startup_s"] < trial["wall_s"]
        run = client.get_run(trial["run_id"])
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        assert tags["strategy_class"] == EXPECTED_CLASS[kind]
        assert int(tags["replicas_in_sync"]) == trial["workers"]
        assert int(tags["parameters"]) == 101_770
        assert int(tags["intra_op_threads"]) == (trial["workers"] if kind == "tf:mirrored" else 1)
        assert tags["device_kind"] == "cpu"
        # Every replica ended with the same weights (tf:mirrored: its two in-process copies); one replica: n/a.
        assert tags["replicas_consistent"] == ("True" if trial["workers"] > 1 else "n/a")
        assert len(tags["param_checksums"].split(",")) == trial["workers"]
        # Each worker process's peak RSS (tf:mirrored: one process holds every replica); the largest as a metric.
        peaks = [float(v) for v in tags["peak_rss_mb_by_rank"].split(",")]
        assert len(peaks) == (1 if kind == "tf:mirrored" else trial["workers"])
        assert 200 < metrics["peak_rss_mb"] < 24_000 and abs(metrics["peak_rss_mb"] - max(peaks)) <= 0.5  # tag: whole MB
        assert trial["peak_rss_mb"] == metrics["peak_rss_mb"]
        assert tags["built_optimizer"] == "adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)"
        assert tags["built_preprocess"].startswith("x*0.00392157+0") and "[0, 1]" in tags["built_preprocess"]
        assert int(params["global_batch"]) == 32 * trial["workers"]
        assert params["threads"] == "1" and params["framework"] == kind.split(":")[0]
        assert metrics["train_loss"] < math.log(10)  # below the loss of a uniform guess
        history = client.get_metric_history(trial["run_id"], "val_accuracy")
        assert [m.step for m in history] == [1]  # per-epoch metrics carry the epoch as step
        steps = int(metrics["steps_per_epoch"])
        assert steps == 8192 // (32 * trial["workers"])
        if latency:
            assert params["window"] == "1" and tags["step_timing"] == "per step (synced)"
            assert metrics["host_syncs"] == steps
        else:
            assert params["window"] == "32" and tags["step_timing"] == "window mean (32 steps per host read)"
            assert 0 < metrics["host_syncs"] <= most_reads(steps, 32)
            assert metrics["steps_per_host_sync"] == pytest.approx(steps / metrics["host_syncs"])
        if kind.startswith("tf:"):
            assert tags["steps_per_call"] == params["window"]  # the window's steps run as one tf.function call
            # No GPU may reach a CPU trial: hidden from each worker process from its start (/proc/self/environ).
            started = tags["worker_start_env"].split(" | ")
            assert all("CUDA_VISIBLE_DEVICES=" in env.split(",") for env in started)  # set, and empty
    assert client.get_run(summary["parent_run_id"]).info.status == "FINISHED"


def test_failing_trial_is_failed_and_the_next_still_runs(run_recipe, capsys):
    """A trial whose model cannot be built ends FAILED with the error, unrestarted, printed with its log file
    (also an artifact of its run); the following trial still runs."""

    def broken_model():
        raise RuntimeError("this model builder is broken on purpose")

    recipe = FASHION.variant(models={**FASHION.models, "torch": broken_model})
    # --concurrency auto on a single-node cluster: one trial at a time, as without it.
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "torch:ddp,tf:none", "--workers", "1",
                                       "--concurrency", "auto")
    assert code == 1
    assert client.get_run(summary["parent_run_id"]).data.params["concurrency"] == "1"
    tags = [client.get_run(t["run_id"]).data.tags for t in summary["trials"]]
    assert [t["overlapped_with"] for t in tags] == ["none", "none"]
    assert float(tags[0]["trial_ended"]) <= float(tags[1]["trial_started"])
    failed, finished = summary["trials"]
    assert (failed["status"], finished["status"]) == ("FAILED", "FINISHED")
    run = client.get_run(failed["run_id"])
    assert run.info.status == "FAILED"
    assert "broken on purpose" in run.data.tags["error"]
    # the recipe's own error: not restarted (the default --max-failures 1 is kept for lost processes)
    assert run.data.metrics["restarts"] == 0
    assert run.data.tags["failure_where"].startswith("the recipe's `broken_model` (")
    err = capsys.readouterr().err
    log = re.search(r"\[torch:ddp x1\] FAILED: .*broken on purpose.* \(log: (raylab-logs/\S+\.log)\)", err)
    assert log and Path(log.group(1)).is_file(), err
    assert Path(log.group(1)).name in [a.path for a in client.list_artifacts(failed["run_id"])]
    assert client.get_run(summary["parent_run_id"]).info.status == "FAILED"
    running = client.search_runs([run.info.experiment_id], filter_string="attributes.status = 'RUNNING'")
    assert running == []


def test_more_workers_than_the_cluster_holds_fails_before_training(run_recipe, capsys):
    """Asking for 3 workers on a 2-CPU cluster is a clear exit-2 error and logs no run."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:ddp", "--workers", "3")
    assert code == 2 and summary is None
    err = capsys.readouterr().err
    assert "needs 3 CPUs" in err and "Ray cluster has 2" in err
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def _keras_adam(lr):
    import keras

    return keras.optimizers.Adam(learning_rate=5e-4)  # Keras' default epsilon, 1e-7


def _torch_adam(params, lr):
    import torch

    return torch.optim.Adam(params, lr=5e-4)  # torch's default epsilon, 1e-8: not the same optimizer


def test_batch_sweep_groups_and_parity_catches_what_was_built(run_recipe, capsys):
    """--batch 32,64 runs each trial at both sizes, grouped by batch in the comparison; per-framework optimizers
    that differ only in a default (Adam's epsilon) make the comparison UNFAIR, from what the workers built."""
    from raylab import Native

    recipe = FASHION.variant(optimizer=Native(tf=_keras_adam, torch=_torch_adam, name="adam-defaults"))
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "tf:none,torch:none", "--batch", "32,64")
    assert code == 0
    assert [t["trial"] for t in summary["trials"]] == ["tf:none x1 b32", "torch:none x1 b32", "tf:none x1 b64",
                                                      "torch:none x1 b64"]
    for trial in summary["trials"]:
        params = client.get_run(trial["run_id"]).data.params
        assert params["batch_per_replica"] == trial["trial"][-2:] == params["global_batch"]
    out = capsys.readouterr().out.split("experiment 'fashion', run")[-1]
    table = [line.split() for line in out.splitlines() if line.startswith(("tf:none x1 b", "torch:none x1 b"))][:4]
    assert [(row[0], row[1], row[2]) for row in table] == [("tf:none", "x1", "b32"), ("torch:none", "x1", "b32"),
                                                          ("tf:none", "x1", "b64"), ("torch:none", "x1", "b64")]
    assert [row[3] for row in table] == ["32", "32", "64", "64"]  # the batch/replica column
    assert "parity: UNFAIR (optimizer as built differ)" in out
    assert "tf:none x1 b32 adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)" in out
    assert "torch:none x1 b32 adam(beta_1=0.9, beta_2=0.999, epsilon=1e-08)" in out
