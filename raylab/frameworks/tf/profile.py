"""`--profile` in TensorFlow (tf:none, tf:mirrored, tf:mwms, tf:tpu): `tf.profiler.experimental`; the XSpace
trace under `tf/plugins/profile/` (TensorBoard's profile plugin opens the `tf` folder), its op events summed per
op type (`xspace_ops`, which torch_xla's trace, the same format, is read with too)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured


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


def xspace_ops(root: Path, found: Captured | None = None) -> list[tuple[str, float, int]]:
    """Op events of every XSpace (`*.xplane.pb`) under root, summed per op type ("scope/name:Type" -> Type;
    other events by name), executor and thread-pool bookkeeping left out. Read with TensorFlow's protobuf
    classes: where TensorFlow is not installed (an xla-only machine) the trace is kept and not summed."""
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError:
        if found is not None:
            found.notes.append("(the XSpace trace is not summed here: reading it needs TensorFlow's protobuf classes)")
        return []

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for path in root.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(path.read_bytes())
        for plane in space.planes:
            for line in plane.lines:
                if line.name == "python" or line.name.startswith("tf_numa"):
                    continue
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if "::" in name or not name:
                        continue
                    op = name.rsplit(":", 1)[1] if ":" in name else name
                    seconds[op] = seconds.get(op, 0.0) + event.duration_ps / 1e12
                    calls[op] = calls.get(op, 0) + 1
    return [(op, s, calls[op]) for op, s in seconds.items()]
