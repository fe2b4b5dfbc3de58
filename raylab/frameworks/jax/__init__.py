"""JAX (Flax NNX models, optax optimizers): what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    name="jax", title="JAX", package="jax", extra="jax",
    kinds=("none", "dp"), single="none", models="jax",
    imports=("jax", "flax.nnx", "optax"), color="tab:purple",
    import_env={"TF_CPP_MIN_LOG_LEVEL": "2"},  # XLA's C++ log level, read at import
    collective_paths=("jax/_src/distributed", "jax/_src/interpreters/pxla"),
)
