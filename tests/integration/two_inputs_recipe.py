"""The two-input recipe of tests/integration/test_jax.py (written from docs/recipes.md alone: two named inputs, AdamW
with a step schedule, accuracy and top-3 accuracy, a global batch of 64) as a recipe file, for bench/studies/compile.py.

    python tests/integration/two_inputs_recipe.py --trials torch:none,tf:none,jax:none --compile off,on
"""

import os
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])  # the repository
sys.path.insert(0, ROOT)
# the workers import the builders from the test module, as the driver does (they inherit its environment)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

from raylab import Recipe, Schedule, main, optimizer  # noqa: E402
from tests.integration import test_jax  # noqa: E402

x, y = test_jax.two_inputs(4096, 0)
xt, yt = test_jax.two_inputs(1024, 1)
RECIPE = Recipe(
    name="two_inputs",
    data=(x, y, xt, yt),
    models={"tf": test_jax.tf_model, "torch": test_jax.torch_model, "jax": test_jax.jax_model},
    loss="sparse_categorical_crossentropy",
    metrics=("accuracy", "top_3_accuracy"),
    optimizer=optimizer("adamw", 3e-3, weight_decay=0.01),
    schedule=Schedule("step", every=100, gamma=0.5),
    batch_per_replica=64,
    global_batch=64,
    epochs=3,
    warmup_steps=8,
)

if __name__ == "__main__":
    main(RECIPE)
