"""Work per sample, counted by each framework's own counter (raylab/frameworks/*/flops.py): the same model is the
same count in TF, torch and JAX, and the fashion MLP's is the analytic one."""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import load_recipe

# The fashion MLP (784-128-10): 2 FLOPs a weight forward, 2 for its gradient, 2 more for the input gradient of
# every layer but the first.
MLP = 2 * (784 * 128 + 128 * 10) * 2 + 2 * 128 * 10  # 409,088


def counts(name, x, y, outputs=()) -> dict[str, float]:
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

    recipe, n = load_recipe(name) if isinstance(name, str) else name, len(x)
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


def test_a_transformers_step_is_counted_alike_token_ids_and_attention_included():
    """recipes/char_lm.py, attention written out (matrix products of queries, keys and values), on int32 token ids:
    the same count in the three frameworks, the analytic one."""
    recipe = load_recipe("char_lm")
    ds = recipe.data(n_train=4, n_test=4)
    found = counts(recipe, ds.x_test, ds.y_test)
    t, d, v = 64, 64, 256
    dense = 2 * t * (2 * (3 * d * d + d * d + 8 * d * d) + d * v)  # qkv, out, the 4x MLP, the head: a forward pass
    attention = 2 * 2 * (2 * t * t * d)  # q.k and the mixing, 2 blocks
    # forward, weight gradients and input gradients (every dense layer's input needs one: embeddings come first)
    assert found["torch"] == found["jax"] == found["tf"] == 3 * (dense + attention), found


def test_the_built_in_attention_layers_are_counted_alike():
    """torch.nn.MultiheadAttention (its SDPA kernel, counted on the meta device), keras.layers.MultiHeadAttention
    (einsums, which TF has no statistic for: raylab/frameworks/tf/flops.py einsum_flops) and nnx.MultiHeadAttention,
    causal, 2 heads: one count, the analytic one."""
    from raylab import Recipe, optimizer

    t, d, heads = 64, 64, 2

    def tf_model(keras=None):
        import keras

        x = keras.Input((t, d))
        return keras.Model(x, keras.layers.MultiHeadAttention(heads, d // heads)(x, x, use_causal_mask=True))

    def torch_model():
        import torch

        class Attention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = torch.nn.MultiheadAttention(d, heads, batch_first=True)

            def forward(self, x):
                mask = torch.nn.Transformer.generate_square_subsequent_mask(t, device=x.device)
                return self.mha(x, x, x, attn_mask=mask, need_weights=False, is_causal=True)[0]

        return Attention()

    def jax_model(rngs):
        import jax.numpy as jnp
        from flax import nnx

        class Attention(nnx.Module):
            def __init__(self):
                self.mha = nnx.MultiHeadAttention(heads, d, d, decode=False, rngs=rngs)

            def __call__(self, x):
                return self.mha(x, mask=nnx.make_causal_mask(jnp.ones(x.shape[:2])))

        return Attention()

    recipe = Recipe(
        "mha",
        data=None,
        models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
        loss="mse",
        optimizer=optimizer("adam", 1e-3),
        batch_per_replica=2,
        epochs=1,
    )
    rng = np.random.default_rng(0)
    x, y = rng.random((2, t, d), dtype=np.float32), rng.random((2, t, d), dtype=np.float32)
    found = counts(recipe, x, y)
    projection, attention = 2 * t * d * d, 2 * t * t * d  # one projection; q.k (or the mixing) over both heads
    # forward: 4 projections and 2 attention products; gradients: the 4 projections' weights, the output
    # projection's input (the inputs' own gradient is not asked for), 4 for the attention products
    assert found["torch"] == found["jax"] == found["tf"] == 9 * projection + 6 * attention, found


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
