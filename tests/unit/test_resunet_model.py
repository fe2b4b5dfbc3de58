"""The ResNet-UNet builders: same trainable parameter count, shapes, initialisers and function in Keras and torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from raylab.models import resunet

H, W = resunet.INPUT_SHAPE[:2]


@pytest.fixture(scope="module")
def torch_net():
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    return resunet.torch_model()


@pytest.fixture(scope="module")
def keras_net():
    import keras

    keras.utils.set_random_seed(0)
    return resunet.tf_model()


def keras_count(model) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def torch_count(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def paired_layers(keras_net, torch_net):
    """(keras layer, torch module) for every layer with weights, matched by name."""
    from torch import nn

    mods = {
        name.replace(".", "_"): m
        for name, m in torch_net.named_modules()
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d))
    }
    layers = {layer.name: layer for layer in keras_net.layers if layer.weights}
    assert set(mods) == set(layers)
    return [(layers[name], mods[name]) for name in sorted(layers)]


def test_module_import_loads_no_framework():
    code = (
        "import sys, raylab.models.resunet; "
        "print(sorted({'torch', 'tensorflow', 'keras', 'tf_keras'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_same_trainable_parameter_count(keras_net, torch_net):
    n = torch_count(torch_net)
    assert keras_count(keras_net) == n
    assert 28_000_000 <= n <= 32_000_000
    assert n == 29_539_970  # the count the module docstring states


def test_tf_keras_builds_the_same_model():
    tf_keras = pytest.importorskip("tf_keras")
    model = resunet.tf_model(tf_keras)
    assert keras_count(model) == 29_539_970
    assert [tuple(o.shape) for o in model.outputs] == [(None, H, W, 1)] * 2


def test_output_shapes(keras_net, torch_net):
    import torch

    x = np.random.default_rng(0).random((2, H, W, 3), dtype=np.float32)
    mask, depth = keras_net(x, training=False)
    assert tuple(mask.shape) == tuple(depth.shape) == (2, H, W, 1)
    assert keras_net.output_names == ["mask", "depth"]
    torch_net.eval()
    with torch.no_grad():
        out = torch_net(torch.from_numpy(x))
    assert isinstance(out, tuple) and len(out) == 2
    assert [tuple(t.shape) for t in out] == [(2, H, W, 1)] * 2


def test_initialisers_match(keras_net, torch_net):
    from torch import nn

    for layer, mod in paired_layers(keras_net, torch_net):
        if isinstance(mod, nn.BatchNorm2d):
            assert (mod.eps, mod.momentum) == (layer.epsilon, 1 - layer.momentum) == (1e-3, pytest.approx(0.1))
            continue
        kernel = layer.kernel.numpy()
        weight = mod.weight.detach().numpy()
        assert kernel.transpose(3, 2, 0, 1).shape == weight.shape, layer.name
        bound = np.sqrt(6.0 / (kernel.shape[-1] + kernel.shape[-2]) / np.prod(kernel.shape[:2]))
        for w in (kernel, weight):
            assert np.abs(w).max() <= bound * (1 + 1e-6)  # float32 rounding
            if w.size > 10_000:  # uniform(-b, b) has std b / sqrt(3)
                assert np.std(w) == pytest.approx(bound / np.sqrt(3), rel=0.05), layer.name
        assert (layer.bias is None) == (mod.bias is None), layer.name
        if mod.bias is not None:
            assert not layer.bias.numpy().any() and not mod.bias.detach().numpy().any()


def test_same_function_with_the_same_weights(keras_net, torch_net):
    """Keras weights (with random BatchNorm statistics) copied into torch give the same outputs."""
    import torch
    from torch import nn

    rng = np.random.default_rng(1)
    with torch.no_grad():
        for layer, mod in paired_layers(keras_net, torch_net):
            if isinstance(mod, nn.BatchNorm2d):
                c = mod.num_features
                gamma, beta = rng.uniform(0.5, 1.5, c), rng.normal(0, 0.1, c)
                mean, var = rng.normal(0, 0.1, c), rng.uniform(0.5, 1.5, c)
                weights = [a.astype(np.float32) for a in (gamma, beta, mean, var)]
                layer.set_weights(weights)
                for t, a in zip((mod.weight, mod.bias, mod.running_mean, mod.running_var), weights):
                    t.copy_(torch.from_numpy(a))
            else:  # Conv2D (kh, kw, in, out) and Conv2DTranspose (kh, kw, out, in) -> torch (.., .., kh, kw)
                kernel, *bias = layer.get_weights()
                mod.weight.copy_(torch.from_numpy(kernel.transpose(3, 2, 0, 1).copy()))
                if bias:
                    bias = rng.normal(0, 0.1, bias[0].shape).astype(np.float32)
                    layer.set_weights([kernel, bias])
                    mod.bias.copy_(torch.from_numpy(bias))
    x = np.random.default_rng(2).random((2, H, W, 3), dtype=np.float32)
    torch_net.eval()
    with torch.no_grad():
        got = [t.numpy() for t in torch_net(torch.from_numpy(x))]
    want = [np.asarray(t) for t in keras_net(x, training=False)]
    for g, w in zip(got, want):
        assert np.abs(g - w).max() <= 1e-4 * max(1.0, np.abs(w).max())
