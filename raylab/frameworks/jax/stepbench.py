"""A step benchmark's JAX worker (raylab/driver/stepbench.py): XLA's thread flags, the device, compilations counted."""

from __future__ import annotations


def env(cfg) -> dict:
    """XLA's CPU threads (read when jax makes its first device) and no GPU memory preallocation."""
    from raylab.frameworks.jax.kinds import thread_env

    return thread_env(cfg.threads)


class Compiles:
    """jax's compilations as the step benchmark reads torch_xla's metrics: metric_data("CompileTime") -> (count, ns)."""

    def __init__(self):
        from raylab.frameworks.jax.compiles import CompileWatch

        self.watch = CompileWatch(0)

    def metric_data(self, name: str):
        count, seconds = self.watch.snapshot()
        return (count, seconds * 1e9) if name == "CompileTime" and count else None


def set_up(ctx, facts: dict, precision: str, gpu: bool):
    """Seed and device into ctx and facts; the builder blocks on its results itself (block_until_ready)."""
    import jax

    device = jax.local_devices()[0]
    if gpu and device.platform != "gpu":
        raise RuntimeError("--device gpu, but jax sees no GPU on this worker (a CPU-only jaxlib?); install "
                           "jax[cuda12] or use --device cpu.")
    ctx.device = device
    ctx.bf16 = precision == "bf16" and device.platform != "cpu"
    facts.update(framework_version=jax.__version__, device_kind=device.platform)
    return Compiles()
