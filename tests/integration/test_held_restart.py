"""A worker lost at a held point of a trial and the trial restarted, in the default tier: torch:none twice in one
warm worker group on the shared local cluster, its worker SIGKILLed as the group starts the first trial and after
the second's last training step (tests/held_recipe.py holds each there until the Killer has acted,
tests/integration/killing.py). The lost processes of every distributed kind, restarted from their checkpoints
beside uninterrupted twins: test_fault_tolerance.py (full tier).
"""

from __future__ import annotations

import pytest

from tests.conftest import paced
from tests.integration.conftest import held, shared_run
from tests.integration.killing import no_train_workers_left
from tests.integration.test_fault_tolerance import runs_by_trial

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # the trials are the shared run's
SECONDS = 32  # 18 s on 2026-12-06, 27 s on 2026-12-07 (the default tier, the 2-core VM)

EDGE_STEPS = paced(100)


@pytest.fixture(scope="module")
def edges(ray_cluster, tmp_path_factory, template_db):
    """torch:none twice, in one warm worker group, 2 epochs: the first repeat loses its worker as the group starts
    it (held as its model is built, before any step or checkpoint), the second as it evaluates its last epoch
    (held after its last training step, before that epoch's checkpoint)."""
    where = tmp_path_factory.mktemp("edges")
    recipe = held(where / "gate", EDGE_STEPS, at_build=True, last_at=2 * EDGE_STEPS)
    return shared_run(
        where,
        template_db,
        "edges",
        1,
        recipe,
        "--quick",
        "--trials",
        "torch:none",
        "--repeats",
        "2",
        "--epochs",
        "2",
        "--steps-per-epoch",
        str(EDGE_STEPS),
        "--checkpoint-every",
        "0",
        kill={"torch:none x1": ["worker@build", "worker@last"]},
        seconds=50,
    )


def test_a_worker_lost_as_its_group_starts_or_after_its_last_step_restarts_once(edges):
    """Issue 61's short-trial cases: each trial restarts exactly once and FINISHES, every epoch logged once; the
    first starts over (there was no checkpoint), the second goes on from epoch 1's; both end with the weights of
    an uninterrupted run (the same seed: each other's, bit for bit)."""
    assert edges.code == 0, edges.tail()
    assert len(edges.killer.killed_runs()) == 2, f"DEFECT OF THE TEST: these landed: {edges.killer.killed}"
    runs = [run for _, run in runs_by_trial(edges)["torch:none x1"]]
    for run in runs:
        assert run.info.status == "FINISHED" and run.data.metrics["restarts"] == 1, run.data.metrics
        steps = [m.step for m in edges.client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert sorted(steps) == [1, 2], steps
    assert "resumed_from_step" not in runs[0].data.metrics
    assert runs[1].data.metrics["resumed_from_step"] == EDGE_STEPS, runs[1].data.metrics
    assert len({r.data.tags["param_checksums"] for r in runs}) == 1
    assert no_train_workers_left()
