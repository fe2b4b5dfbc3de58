"""--profile's pieces with the real profilers: each framework's capture writes its trace, and the summary
names the window, the shares and the top operations."""

from __future__ import annotations

import pytest

from raylab.frameworks.tf import profile as tf_profile
from raylab.frameworks.torch import profile as torch_profile
from raylab.loop import profile


def test_torch_capture_writes_a_chrome_trace_and_its_operations(tmp_path):
    torch = pytest.importorskip("torch")
    found = profile.Captured("")
    model, x = torch.nn.Linear(64, 64), torch.randn(32, 64)
    with torch_profile.capture(cuda=False)(tmp_path, found):
        for _ in range(3):
            model(x).square().mean().backward()
    assert (tmp_path / "torch_trace.json.gz").stat().st_size > 0
    names = {name for name, _, _ in found.ops}
    assert "aten::addmm" in names or "aten::mm" in names, sorted(names)[:20]
    text = profile.summary("torch:none x1", found, (9, 11), 0.5, 0.1)
    assert text.startswith("raylab profile: torch:none x1, rank 0, steps 9-11 (3 steps, one steady window), 0.500 s")
    assert "input wait (the loop's measure): 0.100 s, 20.0% of the window" in text
    assert "communication (all-reduce, broadcast, collectives): 0.000 s, 0.0%" in text
    assert "top " in text and "aten::" in text


def test_tf_capture_writes_an_xspace_and_sums_its_ops_per_type(tmp_path):
    tf = pytest.importorskip("tensorflow")
    found = profile.Captured("")
    w = tf.Variable(tf.random.normal([64, 64]))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    x = tf.random.normal([32, 64])
    step(x)
    with tf_profile.capture(False)(tmp_path, found):
        for _ in range(3):
            step(x)
    assert list((tmp_path / "tf").rglob("*.xplane.pb"))
    ops = {name: (s, n) for name, s, n in found.ops}
    # oneDNN builds run it as _MklMatMul where the CPU has the instructions for it
    matmul = [n for name, (s, n) in ops.items() if name in ("MatMul", "_MklMatMul")]
    assert matmul and matmul[0] >= 3, sorted(ops)
    assert "tf.profiler" in found.tool
    assert set(profile.files(tmp_path)) == {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}


def test_communication_ops_are_told_apart():
    found = profile.Captured("torch.profiler", ops=[("gloo:all_reduce", 0.25, 4), ("aten::mm", 0.75, 8)])
    text = profile.summary("torch:ddp x2", found, (33, 64), 2.0, None)
    assert "communication (all-reduce, broadcast, collectives): 0.250 s, 25.0%" in text
    assert "compute (every other operation): 0.750 s, 75.0%" in text
    assert "input wait" not in text


# A subprocess in which tensorflow cannot be imported, as on a machine with torch_xla and no TensorFlow: the xla path
# profiles one window with its real profiler, and the one XSpace reader (raylab/loop/profile.py) sums the trace.
_NO_TENSORFLOW = """
import sys

sys.modules["tensorflow"] = None  # `import tensorflow` fails and find_spec finds none, as where it is not installed
"""

_XLA_WINDOW = (
    _NO_TENSORFLOW
    + """
import os
from pathlib import Path

os.environ.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")
import torch
import torch_xla.core.xla_model as xm

from raylab.frameworks.xla.profile import capture
from raylab.loop import profile

logdir, found = Path(sys.argv[1]), profile.Captured("")
device = xm.xla_device()
model, x = torch.nn.Linear(64, 64).to(device), torch.randn(32, 64, device=device)
model(x).relu().sum().item()
with capture(False)(logdir, found):
    for _ in range(3):
        model(x).relu().sum().item()
assert sys.modules["tensorflow"] is None  # nothing imported it, or tried and failed
(logdir / "summary.txt").write_text(profile.summary("xla:single x1", found, (9, 11), 0.5, None))
"""
)


def test_the_xla_path_sums_its_trace_without_tensorflow(tmp_path):
    import importlib.util
    import subprocess
    import sys

    # torch_xla is not imported here: beside TensorFlow's libraries (test_tf_capture...) it aborts the process
    if importlib.util.find_spec("torch_xla") is None:
        pytest.skip("torch_xla is not installed")

    run = subprocess.run(
        [sys.executable, "-c", _XLA_WINDOW, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert list((tmp_path / "xla").rglob("*.xplane.pb")) and (tmp_path / "xla_metrics.txt").is_file()
    text = (tmp_path / "summary.txt").read_text()
    assert "not summed" not in text and "operations' self time:" in text, text
    top = text.split("top ", 1)[1].splitlines()[2:]
    assert top and any(row.startswith(("dot", "fusion")) or "fusion" in row.split()[0] for row in top), text


def _field(number: int, value) -> bytes:
    """One protobuf field on the wire: a varint (wire type 0) or bytes (type 2)."""

    def varint(n: int) -> bytes:
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out

    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    value = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(value)) + value


def _xspace() -> bytes:
    """An XSpace as tsl/profiler/protobuf/xplane.proto writes it: one plane, its event metadata a map (id ->
    XEventMetadata), a Python line and an XLA thread line with two ops, a runtime scope and an end marker."""
    names = {1: "dot.3", 2: "scope/add:AddV2", 3: "ThunkExecutor::Execute", 4: "end: dot.3", 5: "$profiler.py:1 f"}
    metadata = b"".join(_field(4, _field(1, i) + _field(2, _field(1, i) + _field(2, n))) for i, n in names.items())

    def events(*spans):  # XEvent: metadata_id 1, offset_ps 2, duration_ps 3
        return b"".join(_field(4, _field(1, m) + _field(2, 5) + _field(3, ps)) for m, ps in spans)

    lines = _field(3, _field(1, 1) + _field(2, "python") + events((5, 10**9), (1, 10**9))) + _field(
        3,
        _field(1, 2)
        + _field(2, "tf_XLAPjRtCpuClient/1")
        + events((1, 2 * 10**9), (1, 10**9), (2, 5 * 10**8), (3, 10**12), (4, 10**9)),
    )
    return _field(1, _field(1, 7) + _field(2, "/host:CPU") + lines + metadata)


def test_the_xspace_reader_sums_ops_of_a_written_trace(tmp_path):
    (tmp_path / "plugins" / "p").mkdir(parents=True)
    (tmp_path / "plugins" / "p" / "host.xplane.pb").write_bytes(_xspace())
    (tmp_path / "bad.xplane.pb").write_bytes(b"\xff\xff\xff")
    found = profile.Captured("")
    ops = sorted(profile.xspace_ops(tmp_path, found))
    assert ops == [("AddV2", 0.0005, 1), ("dot.3", 0.003, 2)]
    assert len(found.notes) == 1 and "bad.xplane.pb" in found.notes[0]
