"""The plain scripts `--plain` runs: Keras fit with steps_per_execution, torch reading back on log steps."""

from __future__ import annotations

import pytest

from raylab.config import Settings, TrialSpec
from raylab.driver.plain_runs import run_plain
from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # the plain scripts run in this process
SECONDS = 20  # 12 s on 2026-12-06, 14 s on 2026-12-07 (the default tier, the 2-core VM)


@pytest.mark.parametrize("framework", ["tf", "torch"])
def test_plain_script_reads_back_once_per_window(framework, tmp_path):
    """Each steps_per_execution call (TF) or log step (torch) is one timed window of --window steps; the job
    still learns and reports what it built."""
    recipe = load_recipe("fashion").variant(warmup_steps=8)
    ds = recipe.data().subset(4096, 1000)
    cfg = Settings(
        trials=[TrialSpec(framework, "plain", 1)],
        epochs=2,
        threads=1,
        seed=0,
        quick=True,
        tracking_uri="",
        experiment="",
        steps_per_epoch=40,
        window=8,
    )
    result = run_plain(recipe, cfg, ds, framework, tmp_path, trace=True)
    steps = [s for _, _, s in result["trace"]]
    assert sum(steps) == 80 and len(result["epochs"]) == 2
    if framework == "tf":  # Keras decides the calls: steps_per_execution=8, no shorter first call
        assert steps == [8] * 10
        assert result["steps_per_call"] == 8 and result["jit_compile"] is False  # Keras' "auto" on a CPU-only machine
    else:  # the trial's windows: the first step alone, the warm-up to its end, then every 8 steps
        assert steps == [1, 7] + [8] * 4 + [8] * 5
    ends = [t for t, _, _ in result["trace"]]
    assert ends == sorted(ends)
    assert result["samples_per_sec"] > 0 and result["val_accuracy"] > 0.5
    done, steady_s = 0, 0.0  # what samples/s rests on, as a trial records it: the windows after the warm-up
    for _, secs, n in result["trace"]:
        steady_s += secs if done >= 8 else 0.0
        done += n
    assert result["steady_steps"] == 72 and result["steady_s"] == pytest.approx(steady_s)
    assert result["built_optimizer"] == "adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)"
    read = result["beside_read"]  # the machine read over the script, as a trial's worker reads its node
    assert read["own"] > 0 and read["seconds"] > 0 and read["all"] > 0
