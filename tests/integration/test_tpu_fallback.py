"""tf:tpu on a cluster with no TPU at all (this machine), with --tpu-fallback mirrored: the trial runs as tf:mirrored
and says so. (The refusal without it: test_tpu.py, default tier; a TPU host without a real TPU: tests/multinode.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 1  # the fallback that runs
SECONDS = 40

FASHION = load_recipe("fashion")


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
