"""XLA's CPU threads: one setting for every framework that runs on XLA's CPU client (jax, and torch_xla's PJRT CPU
device), put in a process's environment before that client is made (at jax's first device, at `import torch_xla`),
and recorded as it was set.

- PJRT_NPROC=threads: the size of the client's thread pool (XLA's DefaultThreadPoolSize reads it, else takes every
  core the process may run on). It is what holds a process to its --threads: `intra_op_parallelism_threads` is no
  XLA flag (XLA stops at `--intra_op_parallelism_threads`; without the dashes it is passed over) and left a 1-thread
  jax CNN step on both cores of the 2-core development VM, 1.75 s of CPU per s (bench/results.md, "Threads").
- XLA_FLAGS=--xla_cpu_multi_thread_eigen=false for one thread, true for more: Eigen's multi-threaded kernels.

Recorded on every trial that sets them: the worker's start environment (`worker_start_env`,
raylab/frameworks/prewarm.py) and the `pjrt_nproc` and `xla_flags` facts (`recorded`)."""

from __future__ import annotations

import os


def env(threads: int) -> dict:
    """The environment that gives XLA's CPU client `threads` threads."""
    eigen = "true" if threads > 1 else "false"
    return {"PJRT_NPROC": str(threads), "XLA_FLAGS": f"--xla_cpu_multi_thread_eigen={eigen}"}


def recorded() -> dict:
    """What this process's XLA CPU client was given, as a trial records it (read from the worker's environment)."""
    return {"pjrt_nproc": os.environ.get("PJRT_NPROC", "unset"), "xla_flags": os.environ.get("XLA_FLAGS", "")}
