"""`--profile` in torch_xla (xla:*): `torch_xla.debug.profiler` trace (an XSpace, under `xla/`, summed by
raylab/loop/profile.py's reader, which needs no TensorFlow) and
`metrics_report()` (compilations, transfers, executions) as `xla_metrics.txt`."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured, xspace_ops


def capture(cuda: bool) -> Callable[[Path, Captured], ContextManager]:
    """A context around one window, writing its files into `logdir`."""

    @contextlib.contextmanager
    def window(logdir: Path, found: Captured):
        import torch_xla.debug.metrics as met
        import torch_xla.debug.profiler as xp

        xp.start_trace(str(logdir / "xla"))  # the metrics are left as they are: the loop counts compiles from them
        try:
            yield
        finally:
            xp.stop_trace()
        (logdir / "xla_metrics.txt").write_text(
            "torch_xla.debug.metrics.metrics_report(), cumulative since the "
            "process started, taken after the profiled window\n\n" + met.metrics_report()
        )
        found.ops.extend(xspace_ops(logdir / "xla", found))
        found.tool = "torch_xla.debug.profiler (XSpace trace: tensorboard --logdir xla) and metrics_report()"

    return window
