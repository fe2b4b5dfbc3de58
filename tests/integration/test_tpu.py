"""tf:tpu on a cluster with no TPU at all (this machine): a clear error before training, or the recorded fallback."""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 1  # the fallback that runs

FASHION = load_recipe("fashion")


def test_tf_tpu_without_a_tpu_is_an_error_before_anything_runs(run_recipe, capsys):
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "tf:tpu")
    err = capsys.readouterr().err
    assert code == 2 and summary is None
    line = err.strip().splitlines()[-1]
    assert line.startswith("raylab: error: tf:tpu: no TPU in the Ray cluster (it has CPU=2")
    assert "run on a TPU node or choose another strategy" in line and "--tpu-fallback mirrored" in line
    # Stopped before any run was started, so none is left RUNNING.
    assert not client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_tf_tpu_fallback_is_recorded_as_mirrored(run_recipe, capsys):
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "tf:tpu", "--tpu-fallback", "mirrored")
    out = capsys.readouterr().out
    assert code == 0
    (trial,) = summary["trials"]
    assert trial["trial"] == "tf:mirrored x1 (asked tf:tpu)" and trial["status"] == "FINISHED"
    tags = client.get_run(trial["run_id"]).data.tags
    assert tags["requested_strategy"] == "tpu" and tags["actual_strategy"] == "mirrored"
    assert tags["strategy_class"] == "MirroredStrategy" and tags["device_kind"] == "cpu"
    assert "Ray assigned this worker no TPU chips" in tags["fallback_reason"]
    assert "TPU" not in tags["ray_resources"]
    # The comparison printed at the end names what ran.
    assert "tf:mirrored x1 (asked tf:tpu)" in out.split("experiment 'fashion', run")[-1]
