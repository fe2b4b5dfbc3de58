"""Model definitions shared by recipes, one builder per framework in each module: `mlp` (the MNIST MLP) and
`resunet` (the seed notebook's 30M-parameter ResNet-UNet for 96x96x3 segmentation + depth)."""

__all__ = ["mlp", "resunet"]  # docs/api.md
