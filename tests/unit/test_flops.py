"""Work per sample, counted by each framework's own counter (raylab/frameworks/*/flops.py): the same model is the
same count in TF, torch and JAX, and the fashion MLP's is the analytic one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import load_recipe

# The fashion MLP (784-128-10): 2 FLOPs a weight forward, 2 for its gradient, 2 more for the input gradient of
# every layer but the first.
MLP = 2 * (784 * 128 + 128 * 10) * 2 + 2 * 128 * 10  # 409,088


def counts(name: str, x, y, outputs=()) -> dict[str, float]:
    """Each framework's FLOPs a sample of one training step of the recipe's model on (x, y)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import jax.numpy as jnp
    import keras
    import tensorflow as tf

    from raylab.frameworks.jax.flops import count as jax_count
    from raylab.frameworks.jax.task import JaxTask
    from raylab.frameworks.tf.flops import count as tf_count
    from raylab.frameworks.tf.task import TFTask
    from raylab.frameworks.torch.flops import count as torch_count
    from raylab.frameworks.torch.task import TorchTask, to_tensors

    recipe, n = load_recipe(name), len(x)
    jt, tt, ft = (JaxTask(recipe.task(outputs), 10), TorchTask(recipe.task(outputs), 10),
                  TFTask(recipe.task(outputs), tf, keras, 10))
    jm = jt.build_model(0)
    jm.train()
    return {"jax": jax_count(jt, jm, jnp.asarray(jt.inputs(x)), jnp.asarray(jt.targets(y))) / n,
            "torch": torch_count(tt, tt.build_model(), to_tensors(tt.inputs(x)), to_tensors(tt.targets(y))) / n,
            "tf": tf_count(ft, ft.build_model(), ft.inputs(x), ft.targets(y)) / n}


@pytest.mark.parametrize("name,shape,classes", [("fashion", (4, 28, 28), 10), ("fashion_cnn", (4, 28, 28), 10),
                                                ("cifar10", (4, 32, 32, 3), 10), ("residual_mlp", (4, 16), 4)])
def test_the_three_counters_agree_on_one_model(name, shape, classes):
    rng = np.random.default_rng(0)
    x, y = rng.random(shape, dtype=np.float32), rng.integers(0, classes, shape[0])
    found = counts(name, x, y)
    low, high = min(found.values()), max(found.values())
    assert high <= 1.10 * low, found  # within 10% (measured: within 0.3%, residual_mlp's LayerNorms 3.3% in TF)
    if name == "fashion":
        assert found["torch"] == found["jax"] == MLP and abs(found["tf"] - MLP) < 0.01 * MLP, found
    if name == "cifar10":  # unpadded convolutions: their gradients count from the gradient's side everywhere
        assert found["torch"] == found["jax"] and abs(found["tf"] - found["torch"]) < 0.01 * found["torch"], found
