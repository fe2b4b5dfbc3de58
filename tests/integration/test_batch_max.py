"""--batch max under a real memory cap: each framework's search finds a batch that trains, the size one above
it ran out of memory in its probe, and the trial runs at the size found, less its 10% margin."""

from __future__ import annotations

import re

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")
K = 256  # each item becomes K copies of itself: ~0.8 MB per activation, little arithmetic


def wide_torch():
    import torch

    class Wide(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.full((K * 784,), 0.01))
            self.out = torch.nn.Linear(784, 10)

        def forward(self, x):
            x = x.reshape(x.shape[0], -1)
            h = x.repeat(1, K) * self.w
            return self.out(h.reshape(x.shape[0], K, 784).mean(1))

    return Wide()


def wide_tf(keras=None):
    import keras
    import tensorflow as tf

    class Wide(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(K * 784,), initializer=keras.initializers.Constant(0.01))

        def call(self, x):
            x = tf.reshape(x, [-1, 784])
            h = tf.tile(x, [1, K]) * self.w
            return tf.reduce_mean(tf.reshape(h, [-1, K, 784]), 1)

    return keras.Sequential([keras.Input((28, 28)), Wide(), keras.layers.Dense(10)])


def test_batch_max_finds_the_largest_batch_under_the_cap_in_torch_and_tf(run_recipe, capsys):
    recipe = FASHION.variant(models={"torch": wide_torch, "tf": wide_tf}, batch_per_replica=256)
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "torch:none,tf:none", "--batch", "max",
                                       "--memory-cap-mb", "3000", "--epochs", "1", "--steps-per-epoch", "4",
                                       "--max-failures", "0")
    captured = capsys.readouterr()
    assert code == 0, [(t["trial"], t["status"], t.get("error")) for t in summary["trials"]] + [captured.err[-4000:]]
    for trial in summary["trials"]:
        run = client.get_run(trial["run_id"])
        tags, params = run.data.tags, run.data.params
        found, failed, ran = (int(tags[k]) for k in ("batch_search_found", "batch_search_failed", "batch_search_ran"))
        assert failed == found + 1, tags  # bisected to one item
        assert re.search(rf"\b{failed} out of host memory \(", tags["batch_search"]), tags["batch_search"]
        assert re.search(rf"\b{found} ok \(", tags["batch_search"])
        assert ran == int(found * 0.9)  # the margin
        assert trial["trial"].endswith(f" b{ran}") and params["batch_per_replica"] == str(ran)
        assert run.info.status == "FINISHED"
        assert 256 < found < 8192, found
