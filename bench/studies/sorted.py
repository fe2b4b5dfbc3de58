"""A label-sorted table streamed against the same rows in memory (issue 49: a streamed epoch is a shuffled epoch).

One Parquet file of 12,000 rows as pandas writes it (20 float32 features in a list column, a label in 5 classes,
the label the argmax of a fixed linear map of the features: a plain MLP learns it past 0.94 on shuffled rows),
sorted by label, as a database export or a file written class by class is; 2,000 test rows beside it. The same
recipe (an MLP 20-64-5, Adam 1e-3, batch 64, 3 epochs) is run twice through its real command line: streamed from
the file (`stream.parquet(train=..., test=...)`) and with the same rows in memory. Prints each trial's test
accuracy both ways, the difference, the `shuffle` each recorded and any WARNING line raylab printed.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/sorted.py
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/sorted.py --trials torch:none --seeds 0,1

Before issue 49 (rows shuffled within chunks of 2,048) the streamed trials ended at 0.72-0.75 here, in memory at
0.94-0.97 (bench/results.md, "A streamed epoch is a shuffled epoch").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
WORK = Path(os.environ.get("RAYLAB_BENCH_DIR", tempfile.gettempdir())) / "raylab-bench-sorted"
ROWS, TEST_ROWS, FEATURES, CLASSES = 12_000, 2_000, 20, 5


def make_table() -> Path:
    """train/sorted.parquet (sorted by label), test/test.parquet and the same arrays as table.npz."""
    import pandas as pd

    if (WORK / "table.npz").exists():
        return WORK
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS + TEST_ROWS, FEATURES)).astype(np.float32)
    y = (x @ rng.normal(size=(FEATURES, CLASSES))).argmax(axis=1).astype(np.int64)
    order = np.argsort(y[:ROWS], kind="stable")
    xs, ys = x[:ROWS][order], y[:ROWS][order]
    for split, (xx, yy) in {"train": (xs, ys), "test": (x[ROWS:], y[ROWS:])}.items():
        (WORK / split).mkdir(parents=True, exist_ok=True)
        name = "sorted.parquet" if split == "train" else "test.parquet"
        pd.DataFrame({"features": list(xx), "label": yy}).to_parquet(WORK / split / name)
    np.savez(WORK / "table.npz", x_train=xs, y_train=ys, x_test=x[ROWS:], y_test=y[ROWS:])
    return WORK


RECIPE = '''"""The label-sorted table (bench/studies/sorted.py): streamed from its Parquet file, or the same rows in
memory."""
import os

import numpy as np

from raylab import Recipe, main, optimizer
from raylab.data import stream

W = os.environ["TABLE_DIR"]


def tf_model(keras=None):
    import keras

    return keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(5)])


def torch_model():
    from torch import nn

    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))


def jax_model(rngs):
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.hidden, self.out = nnx.Linear(20, 64, rngs=rngs), nnx.Linear(64, 5, rngs=rngs)

        def __call__(self, x):
            return self.out(nnx.relu(self.hidden(x)))

    return MLP(rngs)


if os.environ["TABLE_DATA"] == "stream":
    DATA = stream.parquet(train=f"{W}/train", test=f"{W}/test", inputs="features", targets="label", name="sorted-table")
else:
    arrays = np.load(f"{W}/table.npz")
    DATA = tuple(arrays[k] for k in ("x_train", "y_train", "x_test", "y_test"))
RECIPE = Recipe(name="sorted_table", data=DATA, models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
                batch_per_replica=64, epochs=3, loss="sparse_categorical_crossentropy",
                optimizer=optimizer("adam", 1e-3),
                metrics=("accuracy",))
if __name__ == "__main__":
    main(RECIPE)
'''


def run(data: str, trials: str, seed: int) -> tuple[dict, list[str]]:
    """({trial: (val_accuracy, shuffle)}, raylab's WARNING lines) of one invocation."""
    from mlflow.tracking import MlflowClient

    recipe = WORK / "sorted_recipe.py"
    recipe.write_text(RECIPE)
    uri = f"sqlite:///{WORK}/runs.db"
    out = Path(tempfile.mkdtemp()) / "summary.json"
    done = subprocess.run(
        [PY, str(recipe), "--trials", trials, "--seed", str(seed), "--tracking-uri", uri, "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=WORK,
        env={**os.environ, "TABLE_DIR": str(WORK), "TABLE_DATA": data, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise SystemExit(f"{data} failed:\n{done.stderr[-3000:]}")
    client = MlflowClient(tracking_uri=uri)
    got = {}
    for t in json.loads(out.read_text())["trials"]:
        run_ = client.get_run(t["run_id"])
        got[t["trial"]] = (run_.data.metrics["val_accuracy"], run_.data.params.get("shuffle", "(not recorded)"))
    return got, [line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line and "[" in line]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", default="tf:none,torch:none,jax:none")
    p.add_argument("--seeds", default="0")
    args = p.parse_args()
    make_table()
    print(f"{'seed':>4} {'trial':12} {'streamed':>8} {'memory':>8} {'diff':>7}  shuffle (streamed / memory)")
    for seed in (int(s) for s in args.seeds.split(",")):
        streamed, warned = run("stream", args.trials, seed)
        memory, _ = run("memory", args.trials, seed)
        for trial, (acc, shuffle) in streamed.items():
            m_acc, m_shuffle = memory[trial]
            print(
                f"{seed:4} {trial:12} {acc:8.4f} {m_acc:8.4f} {acc - m_acc:+7.4f}  {shuffle} / {m_shuffle}", flush=True
            )
        for line in warned:
            print(f"     console: {line}")


if __name__ == "__main__":
    main()
