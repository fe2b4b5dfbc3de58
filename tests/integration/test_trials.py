"""A trial that cannot be placed is refused before training. (Every trial kind training: test_matrix.py; a failing
trial and the next one running: tests/e2e/test_console.py; the batch sweep: test_stream.py's image folder.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

# A refusal is at the door, in seconds: without it a trial would wait for ever for what the cluster has not.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
RAY_TRAIN_STARTS = 0
SECONDS = 5

FASHION = load_recipe("fashion")


def test_more_workers_than_the_cluster_holds_fails_before_training(run_recipe, capsys):
    """Asking for 3 workers on a 2-CPU cluster is a clear exit-2 error and logs no run."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:ddp", "--workers", "3")
    assert code == 2 and summary is None
    err = capsys.readouterr().err
    assert "needs 3 CPUs" in err and "Ray cluster has 2" in err
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_a_node_type_the_cluster_has_not_is_refused_before_training(run_recipe, capsys):
    """--device cpu:H100 on a cluster with no node of Ray's accelerator type H100: a clear exit-2 error naming the types
    it has and how to add one, before any worker starts, and no run logged."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:none", "--device", "cpu:H100")
    assert code == 2 and summary is None
    err = capsys.readouterr().err
    assert "asks for nodes of accelerator type H100, but no node of the Ray cluster has one (its types: none)" in err
    assert "--resources '{\"accelerator_type:H100\": 1}'" in err, err
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []
