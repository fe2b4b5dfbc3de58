"""JAX's trial kinds: one process on one device (jax:none) and data parallel over Ray Train workers (jax:dp).

jax:dp's backend (below) joins the workers into one JAX program before the loop starts: rank 0 picks a free port
(raylab/frameworks/rendezvous.py), and every worker calls `jax.distributed.initialize(coordinator, num_processes,
process_id)` with its Ray Train rank, on every device. On CPU the processes' collectives are gloo's
(`jax_cpu_collectives_implementation`,
jax's default since 0.5.1); on GPU NCCL and on TPU the chips' own interconnect, through the same code. (Ray's
own `JaxConfig` initialises only on TPU and GPU; on CPU it leaves each process its own world.)

Threads: XLA's CPU client sizes its thread pool when jax first makes a device, from PJRT_NPROC (else every core
the process may run on), so PJRT_NPROC and the flags are in the worker's environment from its start (`worker_env`:
raylab/frameworks/cpu_threads.py, the one setting jax and xla share; recorded as `pjrt_nproc` and `xla_flags`).
XLA_PYTHON_CLIENT_PREALLOCATE=false on every worker: jax would take 75% of a GPU's memory at start, and a
peak-memory figure would then say nothing (recorded as `xla_preallocate`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.train.backend import Backend, BackendConfig

from raylab.frameworks import cpu_threads
from raylab.frameworks.jax.worker import jax_worker_loop
from raylab.frameworks.rendezvous import rank0_address
from raylab.registry import Strategy, always


def thread_env(threads: int) -> dict:
    """What a jax process needs in its environment before jax makes its first device: `threads` CPU threads
    (raylab/frameworks/cpu_threads.py), no GPU memory taken in advance."""
    return {**cpu_threads.env(threads), "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def _worker_env(backend, cfg) -> dict:
    """The threads, and the platform asked for: a CPU trial stays on the CPU where a CUDA jaxlib is installed."""
    return {**thread_env(cfg.threads), "JAX_PLATFORMS": {"gpu": "cuda"}.get(cfg.device, "cpu")}


def _initialize(coordinator: str, processes: int, process_id: int) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, processes, process_id)


def _shutdown() -> None:
    import jax

    jax.distributed.shutdown()


class _JaxBackend(Backend):
    def on_start(self, worker_group, backend_config):
        import ray

        coordinator, n = rank0_address(worker_group), len(worker_group)
        ray.get(
            [
                worker_group.execute_single_async(i, _initialize, coordinator=coordinator, processes=n, process_id=i)
                for i in range(n)
            ]
        )

    def on_shutdown(self, worker_group, backend_config):
        import ray

        try:  # a clean end; after a lost worker the survivors are torn down without it
            ray.get(worker_group.execute_async(_shutdown), timeout=30)
        except Exception:  # noqa: BLE001 - the processes end anyway
            pass


@dataclass
class JaxConfig(BackendConfig):
    @property
    def backend_cls(self):
        return _JaxBackend


_FP16 = "optax applies no loss scaling (jax runs bf16)"
# A jax step is always compiled (jax.jit): --compile off and on both run it, recorded as jit.
_JAX = {"batch_search": True, "worker_env": _worker_env, "fp16": _FP16, "executions": always("jit")}
NONE = Strategy("jax:none", jax_worker_loop, lambda device: BackendConfig(), max_workers=1, warm_with="jax:dp", **_JAX)
DP = Strategy("jax:dp", jax_worker_loop, lambda device: JaxConfig(), **_JAX)

KINDS = {"none": NONE, "dp": DP}
