"""`--profile` in torch (torch:none, torch:ddp): `torch.profiler`, CPU (and CUDA) activity; a Chrome trace
(`torch_trace.json.gz`: chrome://tracing, https://ui.perfetto.dev) and `key_averages()` by self time."""

from __future__ import annotations

import contextlib
import gzip
import shutil
from pathlib import Path
from typing import Callable, ContextManager

from raylab.loop.profile import Captured


def capture(cuda: bool) -> Callable[[Path, Captured], ContextManager]:
    """A context around one window, writing its files into `logdir`."""

    @contextlib.contextmanager
    def window(logdir: Path, found: Captured):
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            yield
        trace = logdir / "torch_trace.json"
        prof.export_chrome_trace(str(trace))
        _gzip(trace)
        device = "device" if cuda else "cpu"
        for e in prof.key_averages():
            us = getattr(e, f"self_{device}_time_total", 0.0) or 0.0
            found.ops.append((e.key, us / 1e6, int(e.count)))
        found.tool = f"torch.profiler ({'CPU and CUDA' if cuda else 'CPU'} activity)"

    return window


def _gzip(path: Path) -> None:
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
