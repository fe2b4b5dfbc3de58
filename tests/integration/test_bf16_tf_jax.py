"""bf16 in TF (Keras mixed_bfloat16, tf:mirrored) and JAX (jax:none, jax:dp x2) on this CPU: test_bf16.py's tests on
their own run (torch and xla's there, in the default tier)."""

from __future__ import annotations

import pytest

from tests.integration.test_bf16 import bf16_run
from tests.integration.test_bf16 import test_bf16_where_the_framework_runs_it_and_a_recorded_fallback_where_not  # noqa: F401
from tests.integration.test_bf16 import test_mnist_records_the_data_that_ran  # noqa: F401 - run here too

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 90


@pytest.fixture(scope="module")
def mnist_bf16(ray_cluster, tmp_path_factory, template_db):
    return bf16_run(tmp_path_factory, template_db, "tf:mirrored,jax:none,jax:dp x2")
