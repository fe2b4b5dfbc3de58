"""--batch max under a real memory cap in TF and JAX (test_batch_max.py's model and checks; torch's search runs there,
in the default tier)."""

from __future__ import annotations

import pytest

from tests.integration.test_batch_max import batch_max_finds_the_largest_batch_under_the_cap

pytestmark = pytest.mark.integration
TIER = "full"
# Per framework: the search's probes (3 to 5 sizes here, as the allocator's edge falls on the machine: 8 to 12
# start-ups in all have been seen) and the trial, each cold; the test reads them from each trial's batch_search_probes
STARTS_VARY = "the --batch max search's probes, as many as the allocator's edge needs here"
RAY_TRAIN_STARTS = 22  # the most: per framework 5 sizes, each tried twice, and the trial
SECONDS = 200


def test_batch_max_finds_the_largest_batch_under_the_cap_in_tf_and_jax(run_recipe, capsys):
    batch_max_finds_the_largest_batch_under_the_cap(run_recipe, capsys, "tf:none,jax:none")
