"""PyTorch: what raylab knows of it without importing it."""

from raylab.registry import CUDA_RUNTIMES, Framework

# A registry entry, laid out by hand: a line a concern.
# fmt: off
FRAMEWORK = Framework(
    name="torch", title="PyTorch", package="torch", extra="torch", models="torch", color="tab:blue",
    kinds=("none", "ddp", "ps-sync", "ps-async"), single="none",
    imports=("torch", "torch.distributed", "torch._dynamo"),  # torch._dynamo: torch.optim's first optimizer imports it
    collective_paths=("torch/distributed",),
    device_errors=("torch",),  # torch.OutOfMemoryError is CUDA's caching allocator
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=("triton", *CUDA_RUNTIMES),
)
# fmt: on
