"""PyTorch: what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    name="torch", title="PyTorch", package="torch", extra="torch",
    kinds=("none", "ddp", "ps-sync", "ps-async"), single="none", models="torch",
    # torch._dynamo: torch.optim's first optimizer imports it.
    imports=("torch", "torch.distributed", "torch._dynamo"), color="tab:blue",
    collective_paths=("torch/distributed",),
    device_errors=("torch",),  # torch.OutOfMemoryError is CUDA's caching allocator
)
