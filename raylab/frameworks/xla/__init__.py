"""PyTorch/XLA through PJRT (torch models on an XLA device): what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    name="xla", title="PyTorch/XLA", package="torch_xla", extra="xla",
    kinds=("single", "ddp"), single="single", models="torch",
    imports=("torch", "torch.distributed", "torch._dynamo", "torch_xla"), color="tab:green",
    collective_paths=("torch_xla",),
    device_errors=("torch",),
)
