"""PyTorch/XLA trials that cannot run here are refused before any trial. (XLA trials learning, agreeing and
compiling only in warm-up: test_matrix.py.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # the XLA trials that train are test_matrix.py's
SECONDS = 5

FASHION = load_recipe("fashion")


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
