"""The recipes define one model per framework with the same trainable parameters and output shape."""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import load_recipe


@pytest.mark.parametrize(
    "name,shape,count",
    [
        ("fashion_cnn", (2, 28, 28), 1_619_084),
        ("cifar10", (2, 32, 32, 3), 1_250_858),
        ("fashion", (2, 28, 28), 101_770),
        ("mnist", (2, 28, 28), 101_770),
    ],
)
def test_every_framework_builds_the_same_model(name, shape, count):
    import jax
    import torch
    from flax import nnx

    recipe = load_recipe(name)
    keras_model, torch_model = recipe.models["tf"](), recipe.models["torch"]()
    assert sum(int(np.prod(w.shape)) for w in keras_model.trainable_weights) == count
    assert sum(p.numel() for p in torch_model.parameters()) == count
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    assert tuple(keras_model(x, training=False).shape) == (2, 10)
    assert tuple(torch_model.eval()(torch.from_numpy(x)).shape) == (2, 10)
    jax_model = recipe.models["jax"](rngs=nnx.Rngs(0))
    assert sum(int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(jax_model, nnx.Param))) == count
    jax_model.eval()
    assert tuple(jax_model(x).shape) == (2, 10)


def test_global_batch_recipes_split_it_over_replicas():
    cnn, fashion = load_recipe("fashion_cnn"), load_recipe("fashion")
    assert [cnn.per_replica(n) for n in (1, 2, 4)] == [1024, 512, 256]
    assert [fashion.per_replica(n) for n in (1, 2)] == [32, 32]  # weak scaling: batch per replica fixed
