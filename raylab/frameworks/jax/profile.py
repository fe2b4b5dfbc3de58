"""`--profile` in JAX (jax:none, jax:dp): `jax.profiler`'s trace of one window, an XSpace under
`jax/plugins/profile/` (TensorBoard's profile plugin or https://ui.perfetto.dev opens it), its events summed per
XLA operation by the one XSpace reader (raylab/loop/profile.py `xspace_ops`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured, xspace_ops


def capture(cuda: bool = False) -> Callable[[Path, Captured], ContextManager]:
    """A context around one window, writing its files into `logdir` (jax's profiler traces every device)."""

    @contextlib.contextmanager
    def window(logdir: Path, found: Captured):
        import jax

        jax.profiler.start_trace(str(logdir / "jax"))
        try:
            yield
        finally:
            jax.profiler.stop_trace()
        found.ops.extend(xspace_ops(logdir / "jax", found))
        found.tool = "jax.profiler (XSpace trace: tensorboard --logdir jax, Profile tab)"

    return window
