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
