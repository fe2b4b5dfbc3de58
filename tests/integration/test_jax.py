"""JAX beside TensorFlow and PyTorch on a recipe written from docs/recipes.md alone: two named inputs, AdamW with a
step schedule, accuracy and top-3 accuracy, a fixed global batch of 64. One invocation, every framework compiled
(--compile on: tf:none with XLA, torch:none and torch:ddp x2 with torch.compile, jax:none, jax:dp x2 jitted), so
the comparison is like with like; jax:dp x2 runs two processes of 32 each, which see the global batches jax:none
sees, so its first steps' losses and its weights are jax:none's up to the order of a float sum (a real all-reduce
between the processes, gloo on CPU).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import shared_run

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 190

TRIALS = ["tf:none x1 xla", "torch:none x1 inductor", "torch:ddp x2 inductor", "jax:none x1", "jax:dp x2"]
EXECUTION = {
    "tf:none x1 xla": "xla",
    "torch:none x1 inductor": "inductor",
    "torch:ddp x2 inductor": "inductor",
    "jax:none x1": "jit",
    "jax:dp x2": "jit",
}


def two_inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    image, meta = rng.normal(size=(n, 8, 8)).astype(np.float32), rng.normal(size=(n, 4)).astype(np.float32)
    w = np.random.default_rng(99).normal(size=(68, 5))
    logits = np.concatenate([image.reshape(n, -1), meta], 1) @ w
    return {"image": image, "meta": meta}, logits.argmax(1).astype(np.int64)


def tf_model(keras=None):
    import keras

    image, meta = keras.Input((8, 8), name="image"), keras.Input((4,), name="meta")
    h = keras.layers.Concatenate()([keras.layers.Flatten()(image), meta])
    h = keras.layers.Dense(32, activation="relu")(h)  # Keras' default initialisers: Glorot-uniform, zero biases
    return keras.Model({"image": image, "meta": meta}, keras.layers.Dense(5)(h))


def torch_model():
    import torch
    from torch import nn

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden, self.out = nn.Linear(68, 32), nn.Linear(32, 5)
            for layer in (self.hidden, self.out):  # as Keras' defaults
                nn.init.xavier_uniform_(layer.weight)
                nn.init.zeros_(layer.bias)

        def forward(self, x):
            return self.out(torch.relu(self.hidden(torch.cat([x["image"].flatten(1), x["meta"]], 1))))

    return Two()


def jax_model(rngs):
    import jax.numpy as jnp
    from flax import nnx

    class Two(nnx.Module):
        def __init__(self):
            init = dict(kernel_init=nnx.initializers.glorot_uniform(), rngs=rngs)  # biases start at zero already
            self.hidden, self.out = nnx.Linear(68, 32, **init), nnx.Linear(32, 5, **init)

        def __call__(self, x):
            h = jnp.concatenate([x["image"].reshape(x["image"].shape[0], -1), x["meta"]], 1)
            return self.out(nnx.relu(self.hidden(h)))

    return Two()


@pytest.fixture(scope="module")
def parity(ray_cluster, tmp_path_factory, template_db):
    from raylab import Recipe, Schedule, optimizer

    x, y = two_inputs(4096, 0)
    xt, yt = two_inputs(1024, 1)
    recipe = Recipe(
        name="two_inputs",
        data=(x, y, xt, yt),
        models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
        loss="sparse_categorical_crossentropy",
        metrics=("accuracy", "top_3_accuracy"),
        optimizer=optimizer("adamw", 3e-3, weight_decay=0.01),
        schedule=Schedule("step", every=100, gamma=0.5),
        batch_per_replica=64,
        global_batch=64,
        epochs=3,
        warmup_steps=8,
    )
    return shared_run(
        tmp_path_factory.mktemp("jax-parity"),
        template_db,
        "jax-parity",
        5,
        recipe,
        "--compile",
        "on",
        "--trials",
        ",".join(t.split()[0] + (" x2" if "x2" in t else "") for t in TRIALS),
        seconds=185,
    )


def test_a_recipe_from_the_docs_trains_in_jax_as_in_tf_and_torch(parity):
    assert parity.code == 0, parity.tail()
    assert [t["trial"] for t in parity.summary["trials"]] == TRIALS
    built = {}
    for name in TRIALS:
        run = parity.run(name)
        assert run.info.status == "FINISHED", name
        m = run.data.metrics
        assert m["val_accuracy"] > 0.6 and m["val_top_3_accuracy"] > m["val_accuracy"], (name, m)
        built[name] = {k: v for k, v in run.data.tags.items() if k.startswith("built_")}
        assert int(run.data.params["global_batch"]) == 64
    first = built["tf:none x1 xla"]
    assert first["built_optimizer"] == "adamw(beta_1=0.9, beta_2=0.999, epsilon=1e-07, weight_decay=0.01)"
    assert first["built_metrics"] == "accuracy,top_3_accuracy"
    assert all(b == first for b in built.values()), built  # what each framework built, in portable terms
    assert "parity: fair" in parity.out
    line = next(x for x in parity.out.splitlines() if x.startswith("    execution (compiled): "))
    assert sorted(line.split(": ", 1)[1].split("; ")) == [
        "inductor: torch:ddp x2 inductor, torch:none x1 inductor",
        "jit: jax:dp x2, jax:none x1",
        "xla: tf:none x1 xla",
    ]
    accs = [parity.run(n).data.metrics["val_accuracy"] for n in TRIALS]
    assert max(accs) - min(accs) < 0.05, dict(zip(TRIALS, accs))


@pytest.mark.parametrize("name", TRIALS)
def test_every_trial_ran_compiled_and_its_compilations_were_counted(parity, name):
    """--compile on: what each trial ran is recorded; compiling happened in the warm-up and never after it, and
    torch.compile found no graph break in the two-input model (fullgraph=True would have raised)."""
    run = parity.run(name)
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert tags["execution"] == params["execution"] == EXECUTION[name]
    assert params["compiled"] == "True" and params["compile_cache"] == "warm"
    assert metrics["compile_count_warmup"] >= 1 and metrics["compile_time_warmup_s"] > 0
    assert metrics["compiles_after_warmup"] == 0 and "recompiled_after_warmup" not in tags
    if EXECUTION[name] == "inductor":
        assert metrics["graph_breaks"] == 0 and tags["optimizer_fused"] == "True"
        assert tags["replicas_consistent"] == ("True" if "x2" in name else "n/a")


def test_jax_dp_is_a_two_process_all_reduce_of_jax_none(parity):
    """Same global batches: the first steps' losses equal (float tolerance), the weights after 192 steps too."""
    none, dp = parity.run("jax:none x1"), parity.run("jax:dp x2")
    assert dp.data.tags["comm_backend"] == "gloo" and dp.data.tags["replicas_in_sync"] == "2"
    assert int(dp.data.params["batch_per_replica"]) == 32 and int(none.data.params["batch_per_replica"]) == 64
    ours = [float(v) for v in dp.data.tags["first_losses"].split(",")]
    theirs = [float(v) for v in none.data.tags["first_losses"].split(",")]
    assert ours == pytest.approx(theirs, rel=1e-5)
    assert len(set(ours)) == 4  # the losses move: four different steps, not one value repeated
    assert dp.data.tags["replicas_consistent"] == "True"
    dp_sum = float(dp.data.tags["param_checksums"].split(",")[0])
    assert dp_sum == pytest.approx(float(none.data.tags["param_checksums"]), rel=1e-4)
    assert dp.data.metrics["val_accuracy"] == pytest.approx(none.data.metrics["val_accuracy"], abs=0.005)
