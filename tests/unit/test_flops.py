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
    jt, tt, ft = (
        JaxTask(recipe.task(outputs), 10),
        TorchTask(recipe.task(outputs), 10),
        TFTask(recipe.task(outputs), tf, keras, 10),
    )
    jm = jt.build_model(0)
    jm.train()
    return {
        "jax": jax_count(jt, jm, jnp.asarray(jt.inputs(x)), jnp.asarray(jt.targets(y))) / n,
        "torch": torch_count(tt, tt.build_model(), to_tensors(tt.inputs(x)), to_tensors(tt.targets(y))) / n,
        "tf": tf_count(ft, ft.build_model(), ft.inputs(x), ft.targets(y)) / n,
    }


@pytest.mark.parametrize(
    "name,shape,classes",
    [
        ("fashion", (4, 28, 28), 10),
        ("fashion_cnn", (4, 28, 28), 10),
        ("cifar10", (4, 32, 32, 3), 10),
        ("residual_mlp", (4, 16), 4),
    ],
)
def test_the_three_counters_agree_on_one_model(name, shape, classes):
    rng = np.random.default_rng(0)
    x, y = rng.random(shape, dtype=np.float32), rng.integers(0, classes, shape[0])
    found = counts(name, x, y)
    assert found["torch"] == found["jax"] == found["tf"], found  # the same products and convolutions, one convention
    if name == "fashion":
        assert found["torch"] == MLP


@pytest.mark.parametrize("layer", ["transposed 2x2 stride 2", "3x3 stride 2 padded", "1x1 stride 2", "3x3 unpadded"])
def test_jax_counts_a_strided_transposed_or_unpadded_convolutions_gradients_as_torch_does(layer):
    """jax writes these gradients as convolutions over dilated or padded arrays; their holes and padding multiply
    nothing, and torch's counter does not count them (forward, input and weight gradients: 3 x the forward)."""
    import jax
    import jax.numpy as jnp
    import torch
    from flax import nnx
    from torch.utils.flop_counter import FlopCounterMode

    from raylab.frameworks.jax.flops import jaxpr_flops

    rngs = nnx.Rngs(0)
    jax_layer, torch_layer = {
        "transposed 2x2 stride 2": (
            nnx.ConvTranspose(8, 4, (2, 2), strides=(2, 2), padding="VALID", rngs=rngs),
            torch.nn.ConvTranspose2d(8, 4, 2, stride=2),
        ),
        "3x3 stride 2 padded": (
            nnx.Conv(8, 4, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)), rngs=rngs),
            torch.nn.Conv2d(8, 4, 3, stride=2, padding=1),
        ),
        "1x1 stride 2": (
            nnx.Conv(8, 4, (1, 1), strides=(2, 2), padding="VALID", rngs=rngs),
            torch.nn.Conv2d(8, 4, 1, stride=2),
        ),
        "3x3 unpadded": (nnx.Conv(8, 4, (3, 3), padding="VALID", rngs=rngs), torch.nn.Conv2d(8, 4, 3)),
    }[layer]
    graph, params, rest = nnx.split(jax_layer, nnx.Param, ...)

    def grads(params, rest, x):
        return jax.grad(lambda p, x: (nnx.merge(graph, p, rest)(x) ** 2).mean(), argnums=(0, 1))(params, x)

    x = torch.ones(2, 8, 16, 16, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        (torch_layer(x) ** 2).mean().backward()
    assert jaxpr_flops(jax.make_jaxpr(grads)(params, rest, jnp.ones((2, 16, 16, 8)))) == counter.get_total_flops()
