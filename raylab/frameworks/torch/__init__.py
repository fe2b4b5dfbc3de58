"""PyTorch: what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    name="torch",
    title="PyTorch",
    package="torch",
    extra="torch",
    kinds=("none", "ddp", "ps-sync", "ps-async"),
    single="none",
    models="torch",
    # torch._dynamo: torch.optim's first optimizer imports it.
    imports=("torch", "torch.distributed", "torch._dynamo"),
    color="tab:blue",
    collective_paths=("torch/distributed",),
    device_errors=("torch",),  # torch.OutOfMemoryError is CUDA's caching allocator
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=(
        "triton",
        "nvidia-cudnn-cu12",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cublas-cu12",
        "nvidia-cuda-nvrtc-cu12",
    ),
)
