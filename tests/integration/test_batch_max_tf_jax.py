"""--batch max under a real memory cap in TF and JAX (test_batch_max.py's model and checks; torch's search runs there,
in the default tier)."""

from __future__ import annotations

import pytest

from tests.integration.test_batch_max import batch_max_finds_the_largest_batch_under_the_cap

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 10  # per framework: three probes (up to five where the edge moves) and the trial, each cold
SECONDS = 200


def test_batch_max_finds_the_largest_batch_under_the_cap_in_tf_and_jax(run_recipe, capsys):
    batch_max_finds_the_largest_batch_under_the_cap(run_recipe, capsys, "tf:none,jax:none")
