"""`--profile`: one steady window of rank 0, profiled in the framework's own format, with a summary to read.

The loop (raylab/loop/epochs.py) profiles the first window after the warm-up on rank 0 (cfg.window steps: one
TF call of k steps, k torch steps, k XLA graphs), inside its framework's profiler context (StepContext.profile,
`capture` in raylab/frameworks/<name>/profile.py): each writes its framework's own trace format (a Chrome trace, an
XSpace) and fills a `Captured` with its
operations' self times. The XSpace traces (TensorFlow's, torch_xla's and jax's profilers all write one) are read here,
by one reader, `xspace_ops`, with no framework's protobuf classes: an install with one framework sums its own trace.

Beside them, `profile_summary.txt`: the window (steps, seconds), the share the loop measured waiting for
input, the operations' self time grouped as communication (all-reduce, broadcast, collectives) and compute,
and the top operations by self time. Op times on a CPU overlap (threads) and, under DDP, communication
overlaps the backward pass: the shares are of the summed op time, not of the wall clock.

Nothing of this runs unless --profile is given: the loop then calls train(k) as it always does.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

SUMMARY = "profile_summary.txt"
TOP = 15
COMMUNICATION = re.compile(
    r"all[-_]?reduce|all[-_]?gather|reduce[-_]scatter|broadcast|collective|gloo|nccl|"
    r"c10d|send|recv",
    re.I,
)


@dataclass
class Captured:
    """What a framework's profiler found: its operations, (name, self seconds, calls), and what it wrote."""

    tool: str
    ops: list[tuple[str, float, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --- an XSpace trace, read ---------------------------------------------------------------------------------------


def xspace_ops(root: Path, found: Captured | None = None) -> list[tuple[str, float, int]]:
    """The operations' events of every XSpace (`*.xplane.pb`) under root, summed per op: TensorFlow's
    "scope/name:Type" as Type, an XLA operation ("dot.62", "broadcast_maximum_fusion") by its name. Left out:
    Python's trace lines, TF's NUMA lines, the runtime's own scopes ("Executor::Run"), Python functions ("$...")
    and XLA's "end: ..." markers. A file that does not parse is noted in `found` and passed over."""
    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}
    for path in sorted(root.rglob("*.xplane.pb")):
        try:
            space = _xspace_class().FromString(path.read_bytes())
        except Exception as e:  # noqa: BLE001 - a damaged trace is kept as written, and said to be so
            if found is not None:
                found.notes.append(f"({path.name} is not summed: it does not parse as an XSpace: {e})")
            continue
        for plane in space.planes:
            names = {entry.key: entry.value.name for entry in plane.event_metadata}
            for line in plane.lines:
                if "python" in line.name.lower() or line.name.startswith("tf_numa"):
                    continue
                for event in line.events:
                    name = names.get(event.metadata_id, "")
                    if not name or "::" in name or name.startswith(("$", "end: ")):
                        continue
                    op = name.rsplit(":", 1)[1] if ":" in name else name
                    seconds[op] = seconds.get(op, 0.0) + event.duration_ps / 1e12
                    calls[op] = calls.get(op, 0) + 1
    return [(op, s, calls[op]) for op, s in seconds.items()]


@functools.cache
def _xspace_class():
    """XSpace's message class, built here from the part of its schema read (tsl/profiler/protobuf/xplane.proto) with
    the protobuf runtime Ray brings. A map field is on the wire a repeated (key, value) entry, and read as one."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    schema = {
        "XEvent": [("metadata_id", 1, F.TYPE_INT64, one, ""), ("duration_ps", 3, F.TYPE_INT64, one, "")],
        "XLine": [("name", 2, F.TYPE_STRING, one, ""), ("events", 4, F.TYPE_MESSAGE, many, "XEvent")],
        "XEventMetadata": [("id", 1, F.TYPE_INT64, one, ""), ("name", 2, F.TYPE_STRING, one, "")],
        "MetadataEntry": [("key", 1, F.TYPE_INT64, one, ""), ("value", 2, F.TYPE_MESSAGE, one, "XEventMetadata")],
        "XPlane": [
            ("name", 2, F.TYPE_STRING, one, ""),
            ("lines", 3, F.TYPE_MESSAGE, many, "XLine"),
            ("event_metadata", 4, F.TYPE_MESSAGE, many, "MetadataEntry"),
        ],
        "XSpace": [("planes", 1, F.TYPE_MESSAGE, many, "XPlane")],
    }
    file = descriptor_pb2.FileDescriptorProto(name="raylab_xplane.proto", package="raylab.xplane", syntax="proto3")
    for message, fields in schema.items():
        m = file.message_type.add(name=message)
        for name, number, kind, label, of in fields:
            m.field.add(
                name=name, number=number, type=kind, label=label, type_name=f".raylab.xplane.{of}" if of else None
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    space = pool.FindMessageTypeByName("raylab.xplane.XSpace")
    make = getattr(message_factory, "GetMessageClass", None)  # protobuf 4.21 on; Ray allows 3.20
    return make(space) if make else message_factory.MessageFactory(pool).GetPrototype(space)


# --- what a person reads -------------------------------------------------------------------------------------


def summary(trial: str, found: Captured, steps: tuple[int, int], seconds: float, input_wait: float | None) -> str:
    """profile_summary.txt: the window, where its time went, the top operations by self time."""
    first, last = steps
    ops = sorted((o for o in found.ops if o[1] > 0), key=lambda o: -o[1])
    total = sum(s for _, s, _ in ops)
    comm = sum(s for name, s, _ in ops if COMMUNICATION.search(name))
    lines = [
        f"raylab profile: {trial}, rank 0, steps {first}-{last} ({last - first + 1} steps, one steady window), "
        f"{seconds:.3f} s of wall clock; {found.tool}",
        "The profiler's own cost is in these seconds: this window's step times are longer than the others'.",
        "",
    ]
    if input_wait is not None:
        lines.append(
            f"input wait (the loop's measure): {input_wait:.3f} s, {_share(input_wait, seconds)} of the window"
        )
    if total:
        lines += [
            f"operations' self time: {total:.3f} s "
            f"(summed over threads{' and devices' if 'CUDA' in found.tool else ''})",
            f"  communication (all-reduce, broadcast, collectives): {comm:.3f} s, {_share(comm, total)}",
            f"  compute (every other operation): {total - comm:.3f} s, {_share(total - comm, total)}",
        ]
    lines += [
        *found.notes,
        "",
        f"top {min(TOP, len(ops))} operations by self time:",
        f"{'operation':<60} {'self s':>10} {'share':>7} {'calls':>7}",
    ]
    lines += [f"{name[:60]:<60} {s:>10.4f} {_share(s, total):>7} {n:>7}" for name, s, n in ops[:TOP]]
    return "\n".join(lines) + "\n"


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def files(logdir: Path) -> dict[str, bytes]:
    """Every file the window's profile wrote, by its path under logdir (what the driver logs as artifacts)."""
    return {str(p.relative_to(logdir)): p.read_bytes() for p in sorted(logdir.rglob("*")) if p.is_file()}
