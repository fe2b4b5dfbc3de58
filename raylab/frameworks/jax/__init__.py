"""JAX (Flax NNX models, optax optimizers): what raylab knows of it without importing it."""

from raylab.registry import Framework

FRAMEWORK = Framework(
    # its Python thread dispatches the next step while XLA's runs this one (pinned to one CPU, a 1-thread
    # jax:none trial ran 0.51-0.71x its plain loop: bench/results.md, --pin-cpus)
    side_cpus=1,
    name="jax",
    title="JAX",
    package="jax",
    extra="jax",
    kinds=("none", "dp"),
    single="none",
    models="jax",
    imports=("jax", "flax.nnx", "optax"),
    color="tab:purple",
    import_env={"TF_CPP_MIN_LOG_LEVEL": "2"},  # XLA's C++ log level, read at import
    collective_paths=("jax/_src/distributed", "jax/_src/interpreters/pxla"),
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=(
        "jaxlib",
        "jax-cuda12-plugin",
        "jax-cuda12-pjrt",
        "libtpu",
        "flax",
        "optax",
        "nvidia-cudnn-cu12",
        "nvidia-cuda-runtime-cu12",
        "nvidia-cublas-cu12",
        "nvidia-cuda-nvrtc-cu12",
    ),
)
