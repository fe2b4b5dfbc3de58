"""TensorFlow (Keras 3 models; tf_keras for tf:ps): what raylab knows of it without importing it."""

from raylab.registry import CUDA_RUNTIMES, Framework

# A registry entry, laid out by hand: a line a concern.
# fmt: off
FRAMEWORK = Framework(
    name="tf", title="TensorFlow", package="tensorflow", extra="tf", models="tf", color="tab:orange",
    kinds=("none", "mirrored", "mwms", "tpu", "ps"), single="none",
    imports=("tensorflow", "keras"),
    import_env={"TF_CPP_MIN_LOG_LEVEL": "2"},  # TF's C++ log level, read at import
    collective_paths=("tensorflow/python/distribute",),
    # its Python thread and TF's executor's beside the intra-op pool (pinned to one CPU, a 1-thread tf:none
    # trial lost 6-9% against itself unpinned: bench/results.md, --pin-cpus)
    side_cpus=1,
    # what its steps compile to and run on besides its package (raylab/probes/host.py keys kept answers on them)
    runtimes=("keras", "tf_keras", "tensorflow-cpu", *CUDA_RUNTIMES),
)
# fmt: on
