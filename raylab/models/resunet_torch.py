"""The ResNet-UNet's torch classes (raylab/models/resunet.py describes the model; `torch_model` builds it)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride, bn):
        super().__init__()
        self.stride = stride
        # Keras "same" with stride 2 on an even size pads 0 before and 1 after: done in forward.
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1 if stride == 1 else 0, bias=False)
        self.bn1 = bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = bn(cout)
        if cin != cout or stride != 1:
            self.proj = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.proj_bn = bn(cout)
        else:
            self.proj = None

    def forward(self, x):
        y = F.pad(x, (0, 1, 0, 1)) if self.stride != 1 else x
        y = F.relu(self.bn1(self.conv1(y)))
        y = self.bn2(self.conv2(y))
        shortcut = self.proj_bn(self.proj(x)) if self.proj is not None else x
        return F.relu(y + shortcut)


class DecoderBlock(nn.Module):
    def __init__(self, cin, skip, cout, bn):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2, bias=True)
        self.conv1 = nn.Conv2d(cout + skip, cout, 3, padding=1, bias=False)
        self.bn1 = bn(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = bn(cout)

    def forward(self, x, skip):
        x = torch.cat([self.up(x), skip], dim=1)
        x = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(x)))


class ResUNet(nn.Module):
    """channels in; stem width; stages ((width, blocks), ...); bottleneck width; bn(c): the BatchNorm of c channels."""

    def __init__(self, channels, stem, stages, bottleneck, bn):
        super().__init__()
        self.stages = len(stages)
        self.stem_conv = nn.Conv2d(channels, stem, 3, padding=1, bias=False)
        self.stem_bn = bn(stem)
        cin = stem
        for i, (width, blocks) in enumerate(stages, start=1):
            stage = []
            for j in range(blocks):
                stage.append(BasicBlock(cin, width, 2 if (j == 0 and i > 1) else 1, bn))
                cin = width
            setattr(self, f"enc{i}", nn.Sequential(*stage))
        self.bottleneck = BasicBlock(cin, bottleneck, 2, bn)
        cin = bottleneck
        for i, (width, _) in reversed(list(enumerate(stages, start=1))):
            setattr(self, f"dec{i}", DecoderBlock(cin, width, width, bn))
            cin = width
        self.mask = nn.Conv2d(cin, 1, 1, bias=True)
        self.depth = nn.Conv2d(cin, 1, 1, bias=True)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)  # NHWC -> NCHW
        x = F.relu(self.stem_bn(self.stem_conv(x)))
        skips = []
        for i in range(1, self.stages + 1):
            x = getattr(self, f"enc{i}")(x)
            skips.append(x)
        x = self.bottleneck(x)
        for i in range(self.stages, 0, -1):
            x = getattr(self, f"dec{i}")(x, skips[i - 1])
        return self.mask(x).permute(0, 2, 3, 1), self.depth(x).permute(0, 2, 3, 1)
