"""`--profile`: one steady window of rank 0, profiled in the framework's own format, with a summary to read.

The loop (raylab/loop/run.py) profiles the first window after the warm-up on rank 0 (cfg.window steps: one
TF call of k steps, k torch steps, k XLA graphs), inside the backend's profiler context (StepContext.profile):

- torch (torch:none, torch:ddp): `torch.profiler`, CPU (and CUDA) activity; a Chrome trace
  (`torch_trace.json.gz`: chrome://tracing, https://ui.perfetto.dev) and `key_averages()` by self time;
- TensorFlow (tf:none, tf:mirrored, tf:mwms, tf:tpu): `tf.profiler.experimental`; the XSpace trace under
  `tf/plugins/profile/` (TensorBoard's profile plugin opens the `tf` folder), its op events summed per op type;
- torch_xla (xla:*): `torch_xla.debug.profiler` trace (the same XSpace format, under `xla/`) and
  `metrics_report()` (compilations, transfers, executions) as `xla_metrics.txt`.

Beside them, `profile_summary.txt`: the window (steps, seconds), the share the loop measured waiting for
input, the operations' self time grouped as communication (all-reduce, broadcast, collectives) and compute,
and the top operations by self time. Op times on a CPU overlap (threads) and, under DDP, communication
overlaps the backward pass: the shares are of the summed op time, not of the wall clock.

Nothing of this runs unless --profile is given: the loop then calls train(k) as it always does.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ContextManager

SUMMARY = "profile_summary.txt"
TOP = 15
COMMUNICATION = re.compile(r"all_?reduce|allgather|all_gather|reduce_scatter|broadcast|collective|gloo|nccl|"
                           r"c10d|send|recv", re.I)


@dataclass
class Captured:
    """What a framework's profiler found: its operations, (name, self seconds, calls), and what it wrote."""

    tool: str
    ops: list[tuple[str, float, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- per framework: a context around one window, writing its files into `logdir` --------------------------

def torch_capture(cuda: bool) -> Callable[[Path, Captured], ContextManager]:
    @contextlib.contextmanager
    def capture(logdir: Path, found: Captured):
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

    return capture


def tf_capture() -> Callable[[Path, Captured], ContextManager]:
    @contextlib.contextmanager
    def capture(logdir: Path, found: Captured):
        import tensorflow as tf

        tf.profiler.experimental.start(str(logdir / "tf"))
        try:
            yield
        finally:
            tf.profiler.experimental.stop()
        found.ops.extend(xspace_ops(logdir / "tf", found))
        found.tool = "tf.profiler (XSpace trace: tensorboard --logdir tf, Profile tab)"

    return capture


def xla_capture() -> Callable[[Path, Captured], ContextManager]:
    @contextlib.contextmanager
    def capture(logdir: Path, found: Captured):
        import torch_xla.debug.metrics as met
        import torch_xla.debug.profiler as xp

        xp.start_trace(str(logdir / "xla"))  # the metrics are left as they are: the loop counts compiles from them
        try:
            yield
        finally:
            xp.stop_trace()
        (logdir / "xla_metrics.txt").write_text("torch_xla.debug.metrics.metrics_report(), cumulative since the "
                                                "process started, taken after the profiled window\n\n"
                                                + met.metrics_report())
        found.ops.extend(xspace_ops(logdir / "xla", found))
        found.tool = "torch_xla.debug.profiler (XSpace trace: tensorboard --logdir xla) and metrics_report()"

    return capture


def _gzip(path: Path) -> None:
    with open(path, "rb") as src, gzip.open(f"{path}.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()


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


# --- what a person reads -------------------------------------------------------------------------------------

def summary(trial: str, found: Captured, steps: tuple[int, int], seconds: float, input_wait: float | None) -> str:
    """profile_summary.txt: the window, where its time went, the top operations by self time."""
    first, last = steps
    ops = sorted((o for o in found.ops if o[1] > 0), key=lambda o: -o[1])
    total = sum(s for _, s, _ in ops)
    comm = sum(s for name, s, _ in ops if COMMUNICATION.search(name))
    lines = [f"raylab profile: {trial}, rank 0, steps {first}-{last} ({last - first + 1} steps, one steady window), "
             f"{seconds:.3f} s of wall clock; {found.tool}",
             "The profiler's own cost is in these seconds: this window's step times are longer than the others'.", ""]
    if input_wait is not None:
        lines.append(f"input wait (the loop's measure): {input_wait:.3f} s, {_share(input_wait, seconds)} of the window")
    if total:
        lines += [f"operations' self time: {total:.3f} s (summed over threads{' and devices' if 'CUDA' in found.tool else ''})",
                  f"  communication (all-reduce, broadcast, collectives): {comm:.3f} s, {_share(comm, total)}",
                  f"  compute (every other operation): {total - comm:.3f} s, {_share(total - comm, total)}"]
    lines += [*found.notes, "", f"top {min(TOP, len(ops))} operations by self time:",
              f"{'operation':<60} {'self s':>10} {'share':>7} {'calls':>7}"]
    lines += [f"{name[:60]:<60} {s:>10.4f} {_share(s, total):>7} {n:>7}" for name, s, n in ops[:TOP]]
    return "\n".join(lines) + "\n"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def files(logdir: Path) -> dict[str, bytes]:
    """Every file the window's profile wrote, by its path under logdir (what the driver logs as artifacts)."""
    return {str(p.relative_to(logdir)): p.read_bytes() for p in sorted(logdir.rglob("*")) if p.is_file()}
