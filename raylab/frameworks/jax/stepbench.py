"""A step benchmark's JAX worker (raylab/driver/stepbench.py): XLA's thread flags, the device, compilations counted."""

from __future__ import annotations


def env(cfg) -> dict:
    """XLA's CPU threads (read when jax makes its first device) and no GPU memory preallocation."""
    from raylab.frameworks.jax.kinds import thread_env

    return thread_env(cfg.threads)


def set_up(ctx, facts: dict, precision: str, gpu: bool):
    """Seed and device into ctx and facts; compiled() -> (compilations, seconds) so far, from jax.monitoring. The
    builder blocks on its results itself (block_until_ready)."""
    import jax

    device = jax.local_devices()[0]
    if gpu and device.platform != "gpu":
        raise RuntimeError(
            "--device gpu, but jax sees no GPU on this worker (a CPU-only jaxlib?); install "
            "jax[cuda12] or use --device cpu."
        )
    ctx.device = device
    ctx.bf16 = precision == "bf16" and device.platform != "cpu"
    facts.update(framework_version=jax.__version__, device_kind=device.platform)
    from raylab.frameworks.jax.compiles import Compilations

    return Compilations().snapshot
