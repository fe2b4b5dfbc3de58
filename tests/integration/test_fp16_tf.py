"""--precision fp16 with dynamic loss scaling in TF, on one replica and two (tf:none, tf:mwms x2): test_fp16.py's
tests on TF's run (torch's run there, in the default tier)."""

from __future__ import annotations

import pytest

from tests.integration.test_fp16 import fp16_run
from tests.integration.test_fp16 import test_fp16_trains_with_a_loss_scale_recorded  # noqa: F401 - run here in TF
from tests.integration.test_fp16 import test_one_replicas_non_finite_gradient_is_skipped_by_every_replica  # noqa: F401

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 90


@pytest.fixture(scope="module")
def fp16(ray_cluster, tmp_path_factory, template_db):
    return fp16_run(tmp_path_factory, template_db, "tf")
