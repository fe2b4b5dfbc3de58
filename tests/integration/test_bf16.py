"""bf16 where the framework runs it on this CPU and a recorded fallback where not: the mnist recipe's MLP with `--set
precision=bf16 --precision-fallback fp32` on the shared local cluster, torch:none (autocast) and xla:single (torch_xla
runs bf16 on a TPU only: fp32, said) here in the full tier (the default tier's bf16 trial: test_image_folder.py); TF
(Keras mixed_bfloat16) and JAX in test_bf16_tf_jax.py
(full tier). (fp16 with loss scaling: test_fp16.py.)"""

from __future__ import annotations

import pytest

from tests.integration.conftest import load_recipe, shared_run
from tests.integration.test_recipes import children

pytestmark = pytest.mark.integration
TIER = "full"  # the default tier's bf16 trial: test_image_folder.py
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 60

TRIALS = "torch:none,xla:single"  # this module's; test_bf16_tf_jax.py runs the same tests on its own
APPLIED = {
    "tf:mirrored x1": "bf16",
    "torch:none x1": "bf16",
    "xla:single x1": "fp32",
    "jax:none x1": "bf16",
    "jax:dp x2": "bf16",
}


def bf16_run(tmp_path_factory, template_db, trials: str):
    """The mnist recipe's MLP in bf16 where the framework runs it on this CPU and in fp32, recorded as a fallback,
    where it does not (xla on CPU)."""
    # one name a shared run (test_bf16_tf_jax.py's has other trials): a slice holding both counts each apart
    return shared_run(
        tmp_path_factory.mktemp("mnist-bf16"),
        template_db,
        f"mnist-bf16 {trials}",
        len(trials.split(",")),
        load_recipe("mnist"),
        "--quick",
        "--trials",
        trials,
        "--set",
        "precision=bf16",
        "--precision-fallback",
        "fp32",
        seconds=27 * len(trials.split(",")),
    )  # 76 s for 3 (2026-11-29)


@pytest.fixture(scope="module")
def mnist_bf16(ray_cluster, tmp_path_factory, template_db):
    return bf16_run(tmp_path_factory, template_db, TRIALS)


def test_bf16_where_the_framework_runs_it_and_a_recorded_fallback_where_not(mnist_bf16):
    """(The CNN in bf16 takes 2 minutes a step of 1024 on this CPU, which has no bf16 instructions.) --set
    precision reaches the trial (it was once accepted and then ignored)."""
    out, client, summary = mnist_bf16.out, mnist_bf16.client, mnist_bf16.summary
    assert mnist_bf16.code == 0, mnist_bf16.tail()
    applied = {}
    for run in children(client, summary):
        assert run.info.status == "FINISHED", run.info.run_name
        assert run.data.params["precision"] == "bf16" and run.data.tags["float32_matmul"] == "ieee"
        applied[run.info.run_name] = run.data.tags["precision_applied"]
        assert run.data.metrics["val_accuracy"] > 0.6, run.info.run_name  # bf16 still learns
        assert run.data.metrics["peak_rss_mb"] > 200
        if run.info.run_name.startswith("xla"):
            assert "TPU only" in run.data.tags["precision_fallback_reason"]
    names = [t["trial"] for t in summary["trials"]]
    assert applied == {name: APPLIED[name] for name in names}
    if "xla:single x1" in names:
        assert "xla:single x1 runs fp32, not bf16: torch_xla 2.9's autocast runs bf16 on a TPU only" in out
    if len(set(applied.values())) > 1:  # the parity report
        assert "! precision: " + ", ".join(f"{name} {APPLIED[name]}" for name in names) in out
    assert "peak RSS MB" in out


def test_mnist_records_the_data_that_ran(mnist_bf16):
    """No MNIST digits on this machine: the run says so and records Fashion-MNIST as its data."""
    client, summary = mnist_bf16.client, mnist_bf16.summary
    assert mnist_bf16.code == 0, mnist_bf16.tail()
    parent = client.get_run(summary["parent_run_id"])
    data = parent.data.params["data"]
    assert data in ("mnist", "fashion-mnist")
    if data == "fashion-mnist":
        assert "MNIST digits not found" in parent.data.tags["data_note"]
        assert "raylab: note: MNIST digits not found" in mnist_bf16.out
    for run in children(client, summary):
        assert run.data.params["data"] == data and run.data.params["batch_per_replica"] == "25"
        assert run.data.params["target_accuracy"] == ("0.97" if data == "mnist" else "0.85")
