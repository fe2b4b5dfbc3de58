"""`--profile` in TensorFlow (tf:none, tf:mirrored, tf:mwms, tf:tpu): `tf.profiler.experimental`; the XSpace
trace under `tf/plugins/profile/` (TensorBoard's profile plugin opens the `tf` folder), its op events summed per
op type by the one XSpace reader (raylab/loop/profile.py `xspace_ops`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured, xspace_ops


def capture(cuda: bool) -> Callable[[Path, Captured], ContextManager]:
    """A context around one window, writing its files into `logdir` (TF's profiler traces every device)."""

    @contextlib.contextmanager
    def window(logdir: Path, found: Captured):
        import tensorflow as tf

        tf.profiler.experimental.start(str(logdir / "tf"))
        try:
            yield
        finally:
            tf.profiler.experimental.stop()
        found.ops.extend(xspace_ops(logdir / "tf", found))
        found.tool = "tf.profiler (XSpace trace: tensorboard --logdir tf, Profile tab)"

    return window
