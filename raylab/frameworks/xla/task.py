"""PyTorch/XLA runs the recipe's torch model: the task is built by torch's builder, on the XLA device
(`TorchTask(..., xla=True)`: Adam and AdamW keep their step on the device)."""

from raylab.frameworks.torch.task import TorchTask as BUILDER  # noqa: F401 - the part every framework has
