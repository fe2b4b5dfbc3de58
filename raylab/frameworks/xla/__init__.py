"""PyTorch/XLA through PJRT (torch models on an XLA device): what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    # PJRT's client runs the step beside the Python thread that traces and dispatches it, as jax's (not measured
    # pinned: taken to be jax's)
    side_cpus=1,
    name="xla",
    title="PyTorch/XLA",
    package="torch_xla",
    extra="xla",
    kinds=("single", "ddp"),
    single="single",
    models="torch",
    imports=("torch", "torch.distributed", "torch._dynamo", "torch_xla"),
    color="tab:green",
    collective_paths=("torch_xla",),
    device_errors=("torch",),
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=("torch", "libtpu", "torch_xla-cuda-plugin"),
)
