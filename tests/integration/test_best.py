"""--compile best on a recipe whose models break the compiled candidates: torch's forward reads a value back to
Python (a graph break, an error under fullgraph=True) and TF's model calls a Python function (no XLA kernel). The
race records each failure and every trial trains in the candidate that ran; the parity report stays fair."""

from __future__ import annotations

import re

import numpy as np
import pytest

from raylab import Recipe, main, optimizer  # noqa: F401 - main: the recipe is a user's file

pytestmark = pytest.mark.integration
TIER = "full"  # the default tier's race: tests/e2e/test_walkthrough.py
RAY_TRAIN_STARTS = 2  # torch:none and tf:none, each kind's two batch sizes in one warm group
SECONDS = 150

rng = np.random.default_rng(0)
X = rng.normal(size=(2048, 8)).astype(np.float32)
Y = (X[:, :4].argmax(1)).astype(np.int64)


def torch_model():
    import torch
    from torch import nn

    class ReadsBack(nn.Module):
        """A forward pass that branches on a value read back to Python: eager runs it, dynamo cannot trace it."""

        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
            for layer in self.body[::2]:  # as Keras's Dense starts: the models' settings alike (parity: fair)
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)

        def forward(self, x):
            out = self.body(x)
            return out if float(out.abs().max()) < 1e6 else torch.zeros_like(out)

    return ReadsBack()


def tf_model(keras=None):
    if keras is None:
        import keras
    import tensorflow as tf

    class PythonOp(keras.layers.Layer):
        """An identity through tf.numpy_function: a graph runs it, XLA has no kernel for it."""

        def call(self, x):
            y = tf.numpy_function(lambda a: a, [x], tf.float32)
            y.set_shape(x.shape)
            return y

    return keras.Sequential(
        [keras.Input((8,)), PythonOp(), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)]
    )


RECIPE = Recipe(
    name="uncompilable",
    data=(X[:1536], Y[:1536], X[1536:], Y[1536:]),
    models={"tf": tf_model, "torch": torch_model},
    loss="sparse_categorical_crossentropy",
    metrics=("accuracy",),
    optimizer=optimizer("adam", 1e-2),
    batch_per_replica=32,
    epochs=1,
)


@pytest.mark.timeout(600)
def test_best_runs_every_trial_where_a_compiled_candidate_fails_and_says_why(run_recipe, capsys):
    """Two batch sizes of two frameworks: four races on the 2-CPU cluster, a CPU each, more than it holds at once.
    They go in waves of two (raylab/probes/race.py `waves`; started all at once, the last two waited 30 minutes for
    CPUs the first two held), and each batch's trials train in what its own race found."""
    code, summary, client = run_recipe(
        RECIPE, "--trials", "torch:none,tf:none", "--compile", "best", "--batch", "32,64"
    )
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    runs = {t["trial"]: client.get_run(t["run_id"]) for t in summary["trials"]}
    names = [f"{kind} x1 b{batch}" for batch in (32, 64) for kind in ("torch:none", "tf:none")]
    assert {name: run.info.status for name, run in runs.items()} == {name: "FINISHED" for name in names}
    assert out.count("raylab: --compile best: timing ") == 4  # one race a (framework, batch)
    for batch in (32, 64):
        torch_run, tf_run = runs[f"torch:none x1 b{batch}"].data, runs[f"tf:none x1 b{batch}"].data
        assert torch_run.tags["execution"] == "eager" and tf_run.tags["execution"] == "tf.function"
        assert torch_run.params["execution_choice"] == tf_run.params["execution_choice"] == "best"
        # the usual execution timed, the compiled one failed on its own (not the race as a whole)
        assert re.match(
            r"eager [\d.]+ ms \(first step [\d.]+ s\); inductor failed: \w+", torch_run.params["execution_candidates"]
        ), torch_run.params["execution_candidates"]
        assert re.match(
            r"tf\.function [\d.]+ ms \(first step [\d.]+ s\); xla failed: \w+", tf_run.params["execution_candidates"]
        ), tf_run.params["execution_candidates"]
        assert "the race failed" not in torch_run.params["execution_candidates"] + tf_run.params["execution_candidates"]
        assert float(torch_run.params["race_s"]) > 0 and torch_run.params["race_source"] == "raced"
        assert "execution_margin" not in torch_run.params  # nothing else ran to win against
        assert torch_run.tags["optimizer_impl"] == "fused"
        assert f"--compile best: PyTorch (batch {batch}, fp32) trains in eager" in out
    assert "parity: fair" in out and "each framework's best" in out, out[-3000:]
