"""`--profile` in JAX (jax:none, jax:dp): `jax.profiler`'s trace of one window, an XSpace under
`jax/plugins/profile/` (TensorBoard's profile plugin or https://ui.perfetto.dev opens it), its events summed per
XLA operation with jax's own reader (`jax.profiler.ProfileData`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured


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
        found.ops.extend(xspace_ops(logdir / "jax"))
        found.tool = "jax.profiler (XSpace trace: tensorboard --logdir jax, Profile tab)"

    return window


def xspace_ops(root: Path) -> list[tuple[str, float, int]]:
    """The XLA operations' events of every XSpace under root, summed per operation name: the device planes'
    and, on CPU, the host's XLA ops (the thunk events), Python's own trace lines left out."""
    from jax.profiler import ProfileData

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for path in root.rglob("*.xplane.pb"):
        data = ProfileData.from_file(str(path))
        for plane in data.planes:
            for line in plane.lines:
                if line.name in ("python", "Python") or "python" in line.name.lower():
                    continue
                for event in line.events:
                    name = event.name
                    if not name or "::" in name or name.startswith(("$", "end: ")):
                        continue
                    seconds[name] = seconds.get(name, 0.0) + event.duration_ns / 1e9
                    calls[name] = calls.get(name, 0) + 1
    return [(op, s, calls[op]) for op, s in seconds.items()]
