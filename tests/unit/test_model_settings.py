"""The model settings the parity report compares (raylab/task/model_settings.py), read from models each framework
really built, and the activation functions a forward pass of each calls (raylab/frameworks/*/layers.py
activations): every bundled recipe's three models alike (the ResNet-UNet's: tests/integration/test_recipes.py, on
the run that trains it); a recipe that keeps each framework's default LayerNorm epsilon, or Flax's default GELU,
is unfair, naming the layers or the activation; initializer spreads and distributions told apart."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from raylab.compare import parity
from raylab.task.model_settings import compare, distribution, family, summary
from tests.door import load_module
from tests.integration.conftest import ROOT, load_recipe


INPUTS = {"fashion": (2, 28, 28), "fashion_cnn": (2, 28, 28), "mnist": (2, 28, 28), "cifar10": (2, 32, 32, 3)}
INPUTS |= {"residual_mlp": (2, 16), "char_lm": (2, 64)}


def read_all(models: dict, shape: tuple | None = None) -> dict:
    """{trial: (model_settings tag, activations tag)}: each framework's model as built; its activations read on
    inputs of `shape` (token ids when the shape is a sequence of 64), or not read (None) without one."""
    import jax.numpy as jnp
    import torch
    from flax import nnx

    from raylab.frameworks.jax import layers as jax_layers
    from raylab.frameworks.tf import layers as tf_layers
    from raylab.frameworks.torch import layers as torch_layers

    x = None
    if shape is not None:
        rng = np.random.default_rng(0)
        x = rng.integers(0, 256, shape, dtype=np.int32) if shape == (2, 64) else rng.random(shape, dtype=np.float32)
    built = {"tf": models["tf"](), "torch": models["torch"](), "jax": models["jax"](nnx.Rngs(0))}
    feeds = {"tf": lambda x: x, "torch": torch.from_numpy, "jax": jnp.asarray}
    return {
        f"{name}:none x1": (
            layers.model_settings(built[name]),
            None if x is None else json.dumps(layers.activations(built[name], feeds[name](x))),
        )
        for name, layers in (("tf", tf_layers), ("torch", torch_layers), ("jax", jax_layers))
    }


def verdict(settings: dict) -> tuple[list[str], list[str]]:
    rows = [
        {
            "trial": t,
            "status": "FINISHED",
            "framework": t.split(":")[0],
            "workers": 1,
            "model_settings": s,
            "activations": a,
        }
        for t, (s, a) in settings.items()
    ]
    return parity.parity(rows)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_bundled_recipes_models_are_alike(name):
    lines, mismatches = verdict(read_all(load_recipe(name).models, INPUTS[name]))
    assert "model settings" not in mismatches, lines
    assert any(line.startswith("    model settings: alike") and "activation call(s)" in line for line in lines), lines


def test_flax_default_gelu_is_unfair_naming_the_activation(tmp_path):
    """recipes/char_lm.py with Flax's default GELU (the tanh approximation) beside torch's and Keras' exact one."""
    text = (ROOT / "recipes" / "char_lm.py").read_text()
    assert text.count("nnx.gelu(self.up(self.norm2(x)), approximate=False)") == 1
    path = tmp_path / "char_lm_flax_gelu.py"
    path.write_text(
        text.replace("nnx.gelu(self.up(self.norm2(x)), approximate=False)", "nnx.gelu(self.up(self.norm2(x)))")
    )
    lines, mismatches = verdict(read_all(load_module(path, path.stem).RECIPE.models, INPUTS["char_lm"]))
    assert mismatches == ["model settings"], lines
    line = next(x for x in lines if x.startswith("  ! model settings: activations: "))
    assert line.endswith("tf:none x1 gelu (exact) x2, torch:none x1 gelu (exact) x2, jax:none x1 gelu (tanh) x2"), line


def test_activations_are_told_apart_in_each_framework():
    """GELU's two forms, SiLU, a sigmoid and tanh, called as functions or layers: one name in every framework."""
    import jax.numpy as jnp
    import keras
    import torch
    from flax import nnx

    from raylab.frameworks.jax.layers import activations as jax_read
    from raylab.frameworks.tf.layers import activations as tf_read
    from raylab.frameworks.torch.layers import activations as torch_read

    class Torch(torch.nn.Module):
        def forward(self, x):
            f = torch.nn.functional
            return f.gelu(x) + f.gelu(x, approximate="tanh") + f.silu(x) + x.sigmoid() + x.tanh()

    class Flax(nnx.Module):
        def __call__(self, x):
            return nnx.gelu(x, approximate=False) + nnx.gelu(x) + nnx.silu(x) + nnx.sigmoid(x) + jnp.tanh(x)

    x = keras.Input((3,))
    parts = [keras.layers.Dense(3, activation=a)(x) for a in ("gelu", "silu", "sigmoid", "tanh")]
    keras_model = keras.Model(x, keras.layers.Add()(parts))
    expected = {"gelu (exact)": 1, "silu": 1, "sigmoid": 1, "tanh": 1}
    ones = np.ones((1, 3), np.float32)
    assert tf_read(keras_model, ones) == expected
    assert torch_read(Torch(), torch.ones(1, 3)) == {**expected, "gelu (tanh)": 1}
    assert jax_read(Flax(), jnp.ones((1, 3))) == {**expected, "gelu (tanh)": 1}


def default_epsilons(tmp_path):
    """recipes/residual_mlp.py with each framework's default LayerNorm epsilon (Keras 1e-3, torch 1e-5, Flax 1e-6)."""
    import importlib.util

    text = (ROOT / "recipes" / "residual_mlp.py").read_text()
    text = text.replace("LayerNormalization(epsilon=EPS)", "LayerNormalization()").replace(", eps=EPS", "")
    text = text.replace(", epsilon=EPS", "")
    assert "EPS)" not in text
    path = tmp_path / "residual_default_eps.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


def test_default_layer_norm_epsilons_are_unfair_naming_the_layers(tmp_path):
    lines, mismatches = verdict(read_all(default_epsilons(tmp_path).models))  # activations not read: not compared
    assert mismatches == ["model settings"], lines  # the report's verdict: "parity: UNFAIR (model settings differ)"
    line = next(x for x in lines if x.startswith("  ! model settings: LayerNorm epsilon: "))
    assert re.search(r"tf:none x1 0.001 \(layer_normalization(_\d+)?\)", line), line  # Keras counts its names
    assert "torch:none x1 1e-05 (1.norm)" in line and "jax:none x1 1e-06 (block1.norm)" in line, line


def test_initial_spreads_name_their_family_and_distribution():
    rng = np.random.default_rng(0)
    fan_in, fan_out = 300, 100
    glorot = rng.uniform(-1, 1, (fan_in, fan_out)) * math.sqrt(6 / (fan_in + fan_out))
    torch_default = rng.uniform(-1, 1, (fan_in, fan_out)) / math.sqrt(fan_in)
    lecun = rng.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)
    assert (family(glorot.std(), fan_in, fan_out), distribution(glorot)) == ("Glorot", "uniform")
    assert (family(torch_default.std(), fan_in, fan_out), distribution(torch_default)) == ("torch default", "uniform")
    assert (family(lecun.std(), fan_in, fan_out), distribution(lecun)) == ("LeCun", "normal")
    square = rng.uniform(-1, 1, (128, 128)) * math.sqrt(6 / 256)
    assert family(square.std(), 128, 128) == "LeCun/Glorot"  # the same spread on a square matrix
    cut = rng.standard_normal(200_000)
    assert distribution(cut[np.abs(cut) < 2]) == "truncated normal"
    assert distribution(np.zeros(10)) == "zeros" and distribution(np.ones(10)) == "ones"
    assert distribution(rng.standard_normal(50)) == "?"  # too few values to tell

    a = summary([], [], [("w", glorot, fan_in, fan_out), ("b", np.zeros(fan_out), None, None)])
    b = summary(
        [],
        [],
        [
            ("1.weight", torch_default.T, fan_in, fan_out),
            ("1.bias", rng.uniform(-1, 1, fan_out) / math.sqrt(fan_in), None, None),
        ],
    )
    lines, differences = compare({"tf:none x1": a, "torch:none x1": b})
    assert differences == [
        "initial 100 parameter: tf:none x1 zeros (b), torch:none x1 std 0.03201 (1.bias)",
        "initial 100x300 parameter: tf:none x1 Glorot uniform, std 0.07046 (w), torch:none x1 torch default uniform, "
        "std 0.03337 (1.weight)",
    ], differences


def test_layers_in_other_numbers_are_compared_as_sets():
    """A Flax module may call one Dropout module three times where Keras and torch have three layers."""
    three = summary([], [("a", 0.25), ("b", 0.25), ("c", 0.5)], [])
    two = summary([], [("drop_block", 0.25), ("drop_dense", 0.5)], [])
    other = summary([], [("drop_block", 0.3), ("drop_dense", 0.5)], [])
    lines, differences = compare({"tf:none x1": three, "jax:none x1": two})
    assert not differences and "dropout layers tf:none x1 3, jax:none x1 2 (values compared as sets)" in lines[-1]
    assert compare({"tf:none x1": three, "jax:none x1": other})[1] == [
        "dropout rate: tf:none x1 0.25 (a) 0.5 (c), jax:none x1 0.3 (drop_block) 0.5 (drop_dense)"
    ]


def test_a_model_too_large_for_the_tag_keeps_its_layers_and_says_its_parameters_were_not_compared():
    """The tracker keeps 5,000 characters of a tag: first the parameters' names go (but each shape's first), then
    their spreads; the normalization and dropout settings stay and are compared. A tag cut short is not read."""
    rng = np.random.default_rng(0)
    weights = [(f"blocks.{i}.weight", rng.uniform(-1, 1, (8, 8 + i)), 8 + i, 8) for i in range(600)]
    big = summary([("norm", "LayerNorm", 1e-5, None)], [("drop", 0.1)], weights)
    from raylab.record.tracking import MAX_TAG

    assert len(big) < MAX_TAG and json.loads(big)["init_omitted"] == 600
    other = summary([("norm", "LayerNorm", 1e-6, None)], [("drop", 0.1)], weights[:1])
    lines, differences = compare({"torch:none x1": big, "jax:none x1": other})
    assert differences == ["LayerNorm epsilon: torch:none x1 1e-05 (norm), jax:none x1 1e-06 (norm)"], lines
    assert "model settings not lined up one to one: initial parameters (too many to record)" in lines[-1]
    cut = compare({"torch:none x1": big[:60], "jax:none x1": other, "tf:none x1": other})
    assert not cut[1] and "alike" in cut[0][0] and "torch:none x1 (its record was cut short)" in cut[0][-1], cut


def test_layers_one_model_does_not_have_are_not_compared():
    """Dropout called as a function in a torch forward is no layer: not a difference (the report says why)."""
    layer = summary([], [("dropout", 0.1)], [])
    functional = summary([], [], [])
    lines, differences = compare({"tf:none x1": layer, "torch:none x1": functional})
    assert not differences and "dropout layers tf:none x1 1, torch:none x1 0 (not compared" in lines[-1], lines
    # a batch norm without running averages (torch's momentum=None) beside one with them: sorted, compared
    norms = summary([("a", "BatchNorm", 1e-5, None), ("b", "BatchNorm", 1e-5, 0.9)], [], [])
    assert not compare({"torch:none x1": norms, "torch:none x2": norms})[1]
    # constant starts of any size are told apart from random ones
    assert distribution(np.full(10, 0.1)) == "constant"
