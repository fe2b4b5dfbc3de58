"""PyTorch/XLA trials on PJRT CPU across real Ray workers: they learn, agree, and compile only in warm-up."""

from __future__ import annotations

import math

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")


@pytest.mark.parametrize("kind,workers,path", [("xla:single", 1, "none"), ("xla:ddp", 2, "gloo-cpu")])
def test_xla_trial_learns_agrees_and_does_not_recompile(run_recipe, kind, workers, path):
    """Loss falls below chance, replicas end identical, no compilation after warm-up, all in MLflow."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", kind, "--workers", str(workers))
    assert code == 0
    (trial,) = summary["trials"]
    assert trial["status"] == "FINISHED" and trial["val_accuracy"] > 0.6
    run = client.get_run(trial["run_id"])
    tags, metrics = run.data.tags, run.data.metrics
    assert metrics["train_loss"] < math.log(10)
    assert tags["sync_path"] == path and tags["pjrt_device"] == "CPU" and tags["device_kind"] == "xla:cpu"
    # PJRT's device was in each worker's environment from its start, before the prewarm thread imported torch_xla.
    assert all("PJRT_DEVICE=CPU" in env.split(",") for env in tags["worker_start_env"].split(" | "))
    assert tags["replicas_consistent"] == ("True" if workers > 1 else "n/a")
    assert len(tags["param_checksums"].split(",")) == workers
    assert len(tags["peak_rss_mb_by_rank"].split(",")) == workers and metrics["peak_rss_mb"] > 200
    assert tags["optimizer_capturable"] == "True"  # Adam's step on the device: no late recompiles
    assert tags["precision_applied"] == "fp32" and int(tags["replicas_in_sync"]) == workers
    assert metrics["compile_count_warmup"] >= 1 and metrics["compile_time_warmup_s"] > 0
    assert metrics["compiles_after_warmup"] == 0 and "recompiled_after_warmup" not in tags
    # torch_xla's own transfer counter: one read per window (+ the first step's and the warm-up's), except
    # where gloo-cpu copies the gradients off the device every step to all-reduce them.
    steps = int(metrics["steps_per_epoch"])
    if path == "gloo-cpu":
        assert metrics["host_syncs"] >= steps
    else:
        assert 0 < metrics["host_syncs"] <= math.ceil(steps / 32) + 2


def test_xla_without_an_importable_torch_xla_is_a_clear_error(run_recipe, tmp_path, monkeypatch, capsys):
    """A torch_xla that fails to import (as with a mismatched torch) stops the run before any trial."""
    fake = tmp_path / "broken" / "torch_xla"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('_XLAC.so: undefined symbol: _ZN3c10')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "xla:single", "--workers", "1")
    err = capsys.readouterr().err
    assert code == 2 and summary is None
    assert "need torch_xla, which does not import here" in err and "undefined symbol" in err
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_pjrt_tpu_without_a_tpu_is_a_clear_error(run_recipe, monkeypatch, capsys):
    """PJRT_DEVICE=TPU on a cluster with no TPU resource is refused before training."""
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    code, summary, _ = run_recipe(FASHION, "--quick", "--trials", "xla:ddp", "--workers", "1")
    assert code == 2 and summary is None
    assert "PJRT_DEVICE=TPU but the Ray cluster has no TPU resource" in capsys.readouterr().err
