"""--precision fp16 with dynamic loss scaling, on one replica and two: an invocation of the fashion MLP per framework
(torch:none and torch:ddp x2 here, in the default tier; tf:none and tf:mwms x2 in test_fp16_tf.py, full tier) whose
model makes rank 1's gradient infinite on every batch that holds a marker image (all white, 16 of them in the train
split), and writes a line per such batch.
Every replica must skip exactly those steps (the loss scale halves each time) and end with the same weights;
rank 0, whose own gradients stayed finite, reports the skips. (fp16 on this CPU is emulated: TF's float16
matmuls run at a 65th of float32's speed here, and both frameworks' float16 convolution gradients at a 100th
or less, so the MLP is what a test can train.)
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from tests.integration.conftest import shared_run
from tests.integration.test_matrix import most_reads

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 35  # 17 s on 2026-12-06, 29 s on 2026-12-07 (the default tier, the 2-core VM)

FRAMEWORK = "torch"  # this module's; test_fp16_tf.py runs the same tests in TF
TRIALS = {"tf": ["tf:none x1", "tf:mwms x2"], "torch": ["torch:none x1", "torch:ddp x2"]}
MARKERS = 16
INITIAL = {"tf": 2.0**15, "torch": 2.0**16}  # Keras' and torch's initial loss scales


def marked():
    """The quick run's fashion subset with MARKERS all-white train images among its first 8,192."""
    from raylab.data import fashion_mnist

    ds = fashion_mnist()
    x = ds.x_train[:8192].copy()
    x[np.linspace(100, 8100, MARKERS).astype(int)] = 255
    return x, ds.y_train[:8192], ds.x_test[:2000], ds.y_test[:2000]


def _rank() -> int:
    import ray.train

    return ray.train.get_context().get_world_rank()


def torch_model(hits: str):
    import torch
    from torch import nn

    rank = _rank()

    class Poison(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h.view_as(h)

        @staticmethod
        def backward(ctx, g):
            return g * float("inf")

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden, self.out, self.dropout = nn.Linear(784, 128), nn.Linear(128, 10), nn.Dropout(0.2)
            for layer in (self.hidden, self.out):
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)

        def forward(self, x):
            x = x.flatten(1)
            h = torch.relu(self.hidden(x))
            if rank == 1 and self.training and bool((x.amin(1) >= 0.99).any()):
                with open(hits, "a") as f:
                    f.write("torch\n")
                h = Poison.apply(h)
            return self.out(self.dropout(h))

    return MLP()


def tf_model(hits: str):
    import keras
    import tensorflow as tf

    rank = _rank()

    class Poison(keras.layers.Layer):
        def call(self, h, x, training=None):
            if rank != 1 or not training:
                return h
            fire = tf.reduce_any(tf.reduce_min(tf.cast(x, tf.float32), axis=1) >= 0.99)

            def log():
                tf.print("tf", output_stream=f"file://{hits}")
                return tf.constant(True)

            logged = tf.cond(fire, log, lambda: tf.constant(False))

            @tf.custom_gradient
            def poison(h):
                def grad(dy):
                    return dy * tf.cast(tf.where(fire, np.inf, 1.0), dy.dtype)

                return tf.identity(h), grad

            with tf.control_dependencies([logged]):
                return poison(h)

    image = keras.Input((28, 28))
    x = keras.layers.Flatten()(image)
    h = keras.layers.Dense(128, activation="relu")(x)
    h = keras.layers.Dropout(0.2)(Poison()(h, x))
    return keras.Model(image, keras.layers.Dense(10)(h))


def fp16_run(tmp_path_factory, template_db, framework: str):
    """One framework's trials in fp16 on the marked data, once for the module: its Ran, with `hits` (one word per
    poisoned batch: "tf" or "torch") and `framework`."""
    from raylab import Recipe, Scale, optimizer

    where = tmp_path_factory.mktemp(f"fp16-{framework}")
    hits = where / "hits.txt"
    recipe = Recipe(
        name="fp16_poison",
        data=marked,
        models={"tf": functools.partial(tf_model, str(hits)), "torch": functools.partial(torch_model, str(hits))},
        loss="sparse_categorical_crossentropy",
        optimizer=optimizer("adam", 5e-4, epsilon=1e-7),
        metrics=("accuracy",),
        preprocess=Scale(1 / 255),
        batch_per_replica=32,
        epochs=1,
    )
    ran = shared_run(
        where,
        template_db,
        f"fp16-{framework}",
        2,
        recipe,
        "--trials",
        ",".join(TRIALS[framework]),
        "--precision",
        "fp16",
        "--steps-per-epoch",
        "96",
        seconds=50,
    )
    ran.hits = hits.read_text().split() if hits.exists() else []
    ran.framework = framework
    return ran


@pytest.fixture(scope="module")
def fp16(ray_cluster, tmp_path_factory, template_db):
    return fp16_run(tmp_path_factory, template_db, FRAMEWORK)


def test_fp16_trains_with_a_loss_scale_recorded(fp16):
    assert fp16.code == 0, fp16.tail()
    fw = fp16.framework
    assert [t["trial"] for t in fp16.summary["trials"]] == TRIALS[fw]
    for name in TRIALS[fw]:
        run = fp16.run(name)
        m, t = run.data.metrics, run.data.tags
        assert run.info.status == "FINISHED" and t["precision_applied"] == "fp16", name
        assert m["val_accuracy"] > 0.6, (name, m)  # training went on through the skipped steps
        skipped = int(m["skipped_steps"])
        # under 2,000 steps the scale never grows: it is halved once per skipped step, no more and no less
        assert m["loss_scale"] == INITIAL[fw] / 2**skipped, (name, m["loss_scale"], skipped)
    assert "precision: fp16" in fp16.out
    assert f"fp16 loss scale (final, steps skipped): {fw}:none x1 {INITIAL[fw]:.0f}, 0 skipped" in fp16.out


def test_one_replicas_non_finite_gradient_is_skipped_by_every_replica(fp16):
    """Rank 1's marker batches made its gradients infinite; rank 0's stayed finite, yet rank 0 skipped each of
    those steps (its skipped_steps is what is recorded) and both ranks ended with the same weights. The one-replica
    trial saw the same markers without the poison and skipped nothing: no skip here comes from fp16 itself."""
    assert fp16.code == 0, fp16.tail()
    framework = fp16.framework
    hits = fp16.hits.count(framework)
    assert hits >= 1, fp16.hits  # the markers reached rank 1 at least once in 96 steps
    run = fp16.run(TRIALS[framework][1])
    assert int(run.data.metrics["skipped_steps"]) == hits, (run.data.metrics, fp16.hits)
    assert run.data.tags["replicas_consistent"] == "True", run.data.tags["param_checksums"]
    single = fp16.run(f"{framework}:none x1")
    assert single.data.metrics["skipped_steps"] == 0


def test_torch_fp16_reads_the_host_no_more_than_fp32(fp16):
    """The default Adam is built fused under fp16: GradScaler's skip decision is taken on the device, so the loop's
    one read per window is the only one (host_syncs is bounded as in fp32, tests/integration/test_matrix.py)."""
    run = fp16.run("torch:none x1")
    m = run.data.metrics
    assert run.data.tags["optimizer_fused"] == "True"
    assert 0 < m["host_syncs"] <= most_reads(96, 32), m
    assert math.isclose(m["steps_per_host_sync"], 96 / m["host_syncs"])
