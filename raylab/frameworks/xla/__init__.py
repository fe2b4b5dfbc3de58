"""PyTorch/XLA through PJRT (torch models on an XLA device): what raylab knows of it without importing it."""

from raylab.registry import Framework

# A registry entry, laid out by hand: a line a concern.
# fmt: off
FRAMEWORK = Framework(
    name="xla", title="PyTorch/XLA", package="torch_xla", extra="xla", models="torch", color="tab:green",
    kinds=("single", "ddp"), single="single",
    imports=("torch", "torch.distributed", "torch._dynamo", "torch_xla"),
    collective_paths=("torch_xla",),
    device_errors=("torch",),
    # PJRT's client runs the step beside the Python thread that traces and dispatches it, as jax's (not measured
    # pinned: taken to be jax's)
    side_cpus=1,
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=("torch", "libtpu", "torch_xla-cuda-plugin"),
)
# fmt: on
