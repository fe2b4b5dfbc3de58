"""A trial that cannot be placed is refused before training; two kinds of a framework share a warm group. (Every trial kind training: test_matrix.py; a failing
trial and the next one running: tests/e2e/test_console.py; the batch sweep: test_stream.py's image folder.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 3  # one warm group per framework for six trials

FASHION = load_recipe("fashion")


def test_more_workers_than_the_cluster_holds_fails_before_training(run_recipe, capsys):
    """Asking for 3 workers on a 2-CPU cluster is a clear exit-2 error and logs no run."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:ddp", "--workers", "3")
    assert code == 2 and summary is None
    err = capsys.readouterr().err
    assert "needs 3 CPUs" in err and "Ray cluster has 2" in err
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []




def test_two_kinds_of_a_framework_share_a_warm_group_set_up_as_the_distributed_one(run_recipe):
    """torch:none with torch:ddp x1, tf:none with tf:mirrored x1, jax:none with jax:dp x1: three Ray Train runs for
    six trials, the second of each warm in the first's processes, which have the distributed kind's set-up
    (`group_setup`); torch:none there records no process group, since its steps use none."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:none,torch:ddp,tf:none,tf:mirrored,"
                                       "jax:none,jax:dp", "--workers", "1", "--steps-per-epoch", "16")
    assert code == 0, [(t["trial"], t["status"], t.get("error")) for t in summary["trials"]]
    runs = {t["trial"]: client.get_run(t["run_id"]) for t in summary["trials"]}
    for first, second, setup in (("torch:none x1", "torch:ddp x1", "torch:ddp x1"),
                                 ("tf:none x1", "tf:mirrored x1", "tf:none x1"), ("jax:none x1", "jax:dp x1", "jax:dp x1")):
        a, b = runs[first].data, runs[second].data
        assert (a.params["start"], a.params["group_index"], b.params["start"], b.params["group_index"]) == \
            ("cold", "0", "warm", "1"), (first, second)
        assert a.tags["train_run"] == b.tags["train_run"] and a.tags["group_setup"] == b.tags["group_setup"] == setup
        assert runs[first].info.status == runs[second].info.status == "FINISHED"
    assert runs["torch:none x1"].data.tags["comm_backend"] == "none"
    assert runs["torch:ddp x1"].data.tags["comm_backend"] == "gloo"
