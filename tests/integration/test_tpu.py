"""tf:tpu on a cluster with no TPU at all (this machine): a clear error before training. (The recorded fallback:
test_tpu_fallback.py, full tier.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # refused before any worker starts
SECONDS = 5

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
