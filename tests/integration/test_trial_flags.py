"""What a trial's own flags and failures leave in MLflow, through the command line: a trial whose own code raises
fails at once, unrestarted, and the next trial of the invocation runs (in bf16's recorded fallback, fp32: torch_xla
runs bf16 on a TPU only); `--plain --pin-cpus` on a host whose peak `raylab peak` measured records the plain script
beside the trial, both pinned, and the trial's utilization."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import load_recipe
from tests.integration.test_recipes import children

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 3  # the failing torch trial and the xla trial after it; the pinned torch trial
SECONDS = 50  # 34 s on 2026-12-06 (the default tier, the 2-core VM)

FASHION = load_recipe("fashion")
BROKEN_AT = 3  # the training step whose forward raises


def broken_torch_model():
    """The fashion MLP whose forward raises at its BROKEN_AT-th training step on the host (the recipe's own code);
    on torch_xla's device (xla:single builds the torch model too) it trains."""
    import torch

    from raylab.models.mlp import torch_model

    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net, self.steps = torch_model(), 0

        def forward(self, x):
            if self.training and x.device.type != "xla":
                self.steps += 1
                if self.steps == BROKEN_AT:
                    raise ValueError("this model is broken on purpose")
            return self.net(x)

    return Broken()


def test_a_trials_own_error_fails_it_unrestarted_and_the_next_trial_runs_in_its_recorded_fallback(run_recipe, capsys):
    recipe = FASHION.variant(models={**FASHION.models, "torch": broken_torch_model})
    code, summary, client = run_recipe(
        recipe,
        "--quick",
        "--compile",
        "off",
        "--trials",
        "torch:none,xla:single",
        "--precision",
        "bf16",
        "--precision-fallback",
        "fp32",
    )
    out, err = capsys.readouterr()
    assert code == 1, err[-3000:]  # a trial failed: the invocation says so
    failed, ran = children(client, summary)
    assert (failed.info.run_name, failed.info.status) == ("torch:none x1", "FAILED")
    tags = failed.data.tags
    assert failed.data.metrics["restarts"] == 0 and tags["failure_kind"] == "error", tags
    assert tags["failure_where"].startswith("the recipe's `forward` ("), tags["error_summary"]
    assert tags["failures"].endswith("-> not restarted: the trial's own code raised") and "|" not in tags["failures"]
    assert "[torch:none x1] FAILED: ValueError: this model is broken on purpose raised in the recipe's" in err
    assert (ran.info.run_name, ran.info.status) == ("xla:single x1", "FINISHED")
    assert ran.data.metrics["val_accuracy"] > 0.6
    assert ran.data.params["precision"] == "bf16" and ran.data.tags["precision_applied"] == "fp32"
    assert "TPU only" in ran.data.tags["precision_fallback_reason"], ran.data.tags
    assert "xla:single x1 runs fp32, not bf16: " in out


def test_plain_and_pinned_from_the_command_line_with_utilization_against_the_measured_peak(
    run_recipe, capsys, tmp_path, monkeypatch
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # the peak raylab keeps for this host: this test's alone
    peak = subprocess.run(
        [
            str(Path(sys.executable).parent / "raylab"),
            "peak",
            "--frameworks",
            "torch",
            "--precision",
            "fp32",
            "--size",
            "512",
            "--seconds",
            "1",
        ],
        env={**os.environ, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert peak.returncode == 0, peak.stderr[-2000:]
    code, summary, client = run_recipe(
        FASHION, "--quick", "--compile", "off", "--trials", "torch:none", "--plain", "--pin-cpus"
    )
    assert code == 0, capsys.readouterr().err[-3000:]
    trial, plain = children(client, summary)
    assert (trial.info.run_name, plain.info.run_name) == ("torch:none x1", "torch:plain x1")
    assert plain.info.status == "FINISHED" and plain.data.params["plain"] == "True"
    assert plain.data.metrics["steady_steps"] > 0 and plain.data.metrics["steady_s"] > 0
    # the plain script ran while the invocation's cluster was up, and says so as a trial does
    assert plain.data.tags["beside"].startswith("node ") and "Ray and this job" in plain.data.tags["beside"]
    assert "the script's own" in plain.data.tags["beside"], plain.data.tags["beside"]
    assert plain.data.metrics["ray_daemon_cores"] > 0 and plain.data.metrics["beside_s"] > 0
    top = max(os.sched_getaffinity(0))  # the driver back on every CPU; the training processes had the last
    for run in (trial, plain):
        assert run.data.params["pin_cpus"] == "True"
        assert run.data.tags["cpu_pinning"].startswith(f"training processes on CPU {top}; "), run.data.tags
    m = trial.data.metrics
    assert 0 < m["utilization"] < 1 and m["utilization"] == pytest.approx(m["achieved_tflops"] / m["peak_tflops"])
    out = capsys.readouterr().out
    assert "torch:none x1 vs torch:plain x1: samples/s" in out and "of peak" in out
