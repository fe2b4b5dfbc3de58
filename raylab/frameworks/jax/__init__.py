"""JAX (Flax NNX models, optax optimizers): what raylab knows of it without importing it."""

from raylab.registry import CUDA_RUNTIMES, Framework

# A registry entry, laid out by hand: a line a concern.
# fmt: off
FRAMEWORK = Framework(
    name="jax", title="JAX", package="jax", extra="jax", models="jax", color="tab:purple",
    kinds=("none", "dp"), single="none",
    imports=("jax", "flax.nnx", "optax"),
    import_env={"TF_CPP_MIN_LOG_LEVEL": "2"},  # XLA's C++ log level, read at import
    collective_paths=("jax/_src/distributed", "jax/_src/interpreters/pxla"),
    # its Python thread dispatches the next step while XLA's runs this one (pinned to one CPU, a 1-thread
    # jax:none trial ran 0.51-0.71x its plain loop: bench/results.md, --pin-cpus)
    side_cpus=1,
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=("jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt", "libtpu", "flax", "optax", *CUDA_RUNTIMES),
)
# fmt: on
