"""ResNet-UNet-like segmentation + depth model, built identically in Keras, PyTorch and Flax NNX (JAX).

Input (N, 96, 96, 3) float32, channels last in both frameworks. Architecture (H x W after each):

- stem: 3x3 conv 3->64 + BN + ReLU (96x96)
- encoder: ResNet-18 stages of residual basic blocks (3x3 conv-BN-ReLU, 3x3 conv-BN, add, ReLU;
  1x1 conv + BN projection shortcut where channels or stride change), 2 blocks each:
  enc1 64 (96x96), enc2 128 (48x48), enc3 256 (24x24), enc4 512 (12x12); the first block of
  enc2..enc4 has stride 2
- bottleneck: one basic block 512->640, stride 2 (6x6)
- decoder: dec4..dec1, each a 2x2 stride-2 transposed conv (with bias) to the skip's width,
  concatenate the encoder stage output at that resolution, then two 3x3 conv-BN-ReLU:
  512 (12x12), 256 (24x24), 128 (48x48), 64 (96x96)
- heads: 1x1 conv 64->1 each (with bias, no activation): `mask` (logits) and `depth` (linear)

Trainable parameters: 29,539,970 in every framework (BatchNorm gamma/beta count as trainable,
moving statistics do not). Outputs: a (mask, depth) pair, each (N, 96, 96, 1) — a list from the
Keras model (output layers named "mask" and "depth"), a tuple from the torch module's forward.

Initialisation is explicit and the same in both: conv kernels Glorot-uniform, biases zero,
convs followed by BatchNorm have no bias, BatchNorm gamma 1 / beta 0, epsilon 1e-3, Keras
momentum 0.9 == torch momentum 0.1. Stride-2 3x3 convs pad like Keras "same" (0 before, 1 after
on even inputs), so with the same weights the two models compute the same function.

No framework is imported at module import time: the torch classes are in resunet_torch.py, which
`torch_model` imports, the Flax ones in resunet_jax.py (`jax_model`).
"""

from __future__ import annotations

__all__ = ["INPUT_SHAPE", "jax_model", "tf_model", "torch_model"]  # docs/api.md

INPUT_SHAPE = (96, 96, 3)
STEM = 64
STAGES = ((64, 2), (128, 2), (256, 2), (512, 2))  # (width, basic blocks); stride 2 from the 2nd
BOTTLENECK = 640
BN_EPSILON = 1e-3
BN_MOMENTUM_KERAS = 0.9  # torch: 1 - 0.9 = 0.1


def tf_model(keras=None):
    """The Keras model, un-compiled: input (N, 96, 96, 3), outputs [mask, depth] each (N, 96, 96, 1).

    `keras` is the Keras module to build with (Keras 3 by default; tf_keras also works).
    Layer names match the torch module's submodule paths with "." replaced by "_".
    """
    if keras is None:
        import keras
    L = keras.layers
    init = {"data_format": "channels_last", "kernel_initializer": "glorot_uniform", "bias_initializer": "zeros"}

    def conv(x, filters, kernel, stride, name, bias=False):
        return L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=bias, name=name, **init)(x)

    def bn(x, name):
        return L.BatchNormalization(axis=-1, momentum=BN_MOMENTUM_KERAS, epsilon=BN_EPSILON, name=name)(x)

    def basic_block(x, cin, cout, stride, name):
        y = L.ReLU(name=f"{name}_relu1")(bn(conv(x, cout, 3, stride, f"{name}_conv1"), f"{name}_bn1"))
        y = bn(conv(y, cout, 3, 1, f"{name}_conv2"), f"{name}_bn2")
        if cin != cout or stride != 1:
            x = bn(conv(x, cout, 1, stride, f"{name}_proj"), f"{name}_proj_bn")
        return L.ReLU(name=f"{name}_relu2")(L.Add(name=f"{name}_add")([y, x]))

    def decoder_block(x, skip, cout, name):
        x = L.Conv2DTranspose(cout, 2, strides=2, padding="valid", use_bias=True, name=f"{name}_up", **init)(x)
        x = L.Concatenate(axis=-1, name=f"{name}_cat")([x, skip])
        x = L.ReLU(name=f"{name}_relu1")(bn(conv(x, cout, 3, 1, f"{name}_conv1"), f"{name}_bn1"))
        return L.ReLU(name=f"{name}_relu2")(bn(conv(x, cout, 3, 1, f"{name}_conv2"), f"{name}_bn2"))

    inputs = keras.Input(INPUT_SHAPE, name="image")
    x = L.ReLU(name="stem_relu")(bn(conv(inputs, STEM, 3, 1, "stem_conv"), "stem_bn"))
    cin, skips = STEM, []
    for i, (width, blocks) in enumerate(STAGES, start=1):
        for j in range(blocks):
            x = basic_block(x, cin, width, 2 if (j == 0 and i > 1) else 1, f"enc{i}_{j}")
            cin = width
        skips.append((i, width, x))
    x = basic_block(x, cin, BOTTLENECK, 2, "bottleneck")
    for i, width, skip in reversed(skips):
        x = decoder_block(x, skip, width, f"dec{i}")
    mask = conv(x, 1, 1, 1, "mask", bias=True)
    depth = conv(x, 1, 1, 1, "depth", bias=True)
    return keras.Model(inputs, [mask, depth], name="resunet")


def torch_model():
    """The torch module: forward((N, 96, 96, 3) float) -> (mask, depth), each (N, 96, 96, 1).

    Permutes to NCHW inside and back to NHWC on the way out (the outputs are permuted views).
    The classes are in resunet_torch.py, imported here: no framework at this module's import.
    """
    from torch import nn

    from raylab.models.resunet_torch import ResUNet

    def bn(c):
        return nn.BatchNorm2d(c, eps=BN_EPSILON, momentum=1.0 - BN_MOMENTUM_KERAS)

    return ResUNet(INPUT_SHAPE[-1], STEM, STAGES, BOTTLENECK, bn)


def jax_model(rngs):
    """The Flax NNX module: (N, 96, 96, 3) -> (mask, depth), each (N, 96, 96, 1); BatchNorm momentum 0.9 (Flax
    counts it as Keras does), epsilon 1e-3. The classes are in resunet_jax.py, imported here."""
    from flax import nnx

    from raylab.models.resunet_jax import ResUNet

    def bn(c):
        return nnx.BatchNorm(c, momentum=BN_MOMENTUM_KERAS, epsilon=BN_EPSILON, rngs=rngs)

    return ResUNet(INPUT_SHAPE[-1], STEM, STAGES, BOTTLENECK, bn, rngs)
