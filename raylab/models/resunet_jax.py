"""The ResNet-UNet's Flax NNX classes (raylab/models/resunet.py describes the model; `jax_model` builds it).

Channels last, as the data and the Keras model. XLA's "SAME" padding of a stride-2 3x3 convolution on an even size
pads 0 before and 1 after, as Keras' "same" does.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx


def _conv(cin, cout, kernel, stride, rngs, bias=False):
    return nnx.Conv(
        cin,
        cout,
        (kernel, kernel),
        strides=(stride, stride),
        padding="SAME",
        use_bias=bias,
        kernel_init=nnx.initializers.glorot_uniform(),
        bias_init=nnx.initializers.zeros_init(),
        rngs=rngs,
    )


class BasicBlock(nnx.Module):
    def __init__(self, cin, cout, stride, bn, rngs):
        self.conv1, self.bn1 = _conv(cin, cout, 3, stride, rngs), bn(cout)
        self.conv2, self.bn2 = _conv(cout, cout, 3, 1, rngs), bn(cout)
        self.proj = _conv(cin, cout, 1, stride, rngs) if cin != cout or stride != 1 else None
        self.proj_bn = bn(cout) if self.proj is not None else None

    def __call__(self, x):
        y = nnx.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        shortcut = self.proj_bn(self.proj(x)) if self.proj is not None else x
        return nnx.relu(y + shortcut)


class DecoderBlock(nnx.Module):
    def __init__(self, cin, skip, cout, bn, rngs):
        self.up = nnx.ConvTranspose(
            cin,
            cout,
            (2, 2),
            strides=(2, 2),
            padding="VALID",
            kernel_init=nnx.initializers.glorot_uniform(),
            bias_init=nnx.initializers.zeros_init(),
            rngs=rngs,
        )
        self.conv1, self.bn1 = _conv(cout + skip, cout, 3, 1, rngs), bn(cout)
        self.conv2, self.bn2 = _conv(cout, cout, 3, 1, rngs), bn(cout)

    def __call__(self, x, skip):
        x = jnp.concatenate([self.up(x), skip], axis=-1)
        x = nnx.relu(self.bn1(self.conv1(x)))
        return nnx.relu(self.bn2(self.conv2(x)))


class ResUNet(nnx.Module):
    """channels in; stem width; stages ((width, blocks), ...); bottleneck width; bn(c): the BatchNorm of c channels."""

    def __init__(self, channels, stem, stages, bottleneck, bn, rngs):
        self.stem_conv, self.stem_bn = _conv(channels, stem, 3, 1, rngs), bn(stem)
        cin, encoders = stem, []
        for i, (width, blocks) in enumerate(stages, start=1):
            stage = []
            for j in range(blocks):
                stage.append(BasicBlock(cin, width, 2 if (j == 0 and i > 1) else 1, bn, rngs))
                cin = width
            encoders.append(nnx.List(stage))
        self.encoders = nnx.List(encoders)
        self.bottleneck = BasicBlock(cin, bottleneck, 2, bn, rngs)
        cin, decoders = bottleneck, []
        for width, _ in reversed(stages):
            decoders.append(DecoderBlock(cin, width, width, bn, rngs))
            cin = width
        self.decoders = nnx.List(decoders)
        self.mask, self.depth = _conv(cin, 1, 1, 1, rngs, bias=True), _conv(cin, 1, 1, 1, rngs, bias=True)

    def __call__(self, x):
        x = nnx.relu(self.stem_bn(self.stem_conv(x)))
        skips = []
        for stage in self.encoders:
            for block in stage:
                x = block(x)
            skips.append(x)
        x = self.bottleneck(x)
        for decoder, skip in zip(self.decoders, reversed(skips)):
            x = decoder(x, skip)
        return self.mask(x), self.depth(x)
