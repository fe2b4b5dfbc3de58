"""What a streamed trial's input delivers per data CPU, against the best plain one-process reader of the same files.

Four sources, each read both ways in the same run, the order alternating between rounds:

    exported   Fashion-MNIST as `raylab data export` writes it (60,000 rows of 28x28 uint8, tensor columns, 8 files)
    pandas     a 5-class, 20-feature table written by pandas, a list<float> column (4 files, --pandas-rows rows)
    images     a folder of 32x32 RGB PNGs, 3 class sub-folders (--images files)
    images-export   the same folder after `raylab data export` (Parquet of decoded pixels, 8,192 rows a file)
    generator  items made by a function (stream.generator), 32x32x3 uint8, --generated items

raylab: a 1-worker Ray Train group on a 2-CPU in-process cluster (the worker reserves one CPU, Ray Data has the
other: 1 data CPU), reading its split through the same StreamShard and StreamBatches a torch:none trial uses
(Arrow chunks cut into prepared batches in the worker), with a step that does nothing; --passes passes, timed from
the second pass's first batch to the last pass's first batch, the passes between counted (what was read ahead while
the first pass started is left out; every later pass's start is counted, as a trial's epochs are; a delivery that
hands a pass out only once it is read, a shuffle window holding the whole split, is timed over whole passes too:
its first batch of a pass is where the reading of that pass ended).
plain: one process, no Ray: pyarrow reads each file (the list column flattened to one array by Arrow), shuffled,
cut into batches; PIL decodes each image; the generator's function called on each batch of ids. The same passes.

Prints samples/s of each side per round, the median ratio raylab per data CPU / plain (1 data CPU, so the same
figure), and the time to the first batch.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/delivery.py --rounds 3

--trials runs whole trials instead, through the recipes' real command line: the pandas table (TABLE_RECIPE, an
MLP on its 20 features, 5 epochs) and the Fashion-MNIST MLP on its export (3 epochs); it prints each trial's
samples/s, input_wait_share, the step's wait for its first batch after the model was built
(stream_first_wait_s) and the start-up phases.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/delivery.py --trials tf:none,torch:none

--cutter times the worker's reader and cutter threads alone, without Ray (raylab/data/deliver.py over passes of
in-memory chunks shaped as the exported, pandas and image sources' rows, cut into torch batches): what the shuffle
costs the delivery, on whichever raylab is imported (PYTHONPATH), so two trees can be run in turn; `window` is the
same with the shuffle window held to a quarter of the split (WINDOW_BYTES), where raylab has one.

    .venv/bin/python bench/studies/delivery.py --cutter --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
WORK = Path(os.environ.get("RAYLAB_BENCH_DIR", tempfile.gettempdir())) / "raylab-bench-delivery"
BATCH = 64


# -- the data ------------------------------------------------------------------------------------------------
def exported_fashion() -> Path:
    out = WORK / "fashion-parquet"
    if not (out / "raylab-data.json").exists():
        subprocess.run(
            [PY, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"), str(out)],
            check=True,
            capture_output=True,
        )
    return out


def pandas_parquet(rows: int) -> Path:
    import pandas as pd

    out = WORK / f"pandas-{rows}"
    if not (out / "done").exists():
        rng = np.random.default_rng(0)
        for split, n in (("train", rows), ("test", max(rows // 6, 256))):
            (out / split).mkdir(parents=True, exist_ok=True)
            x, y = rng.normal(size=(n, 20)).astype(np.float32), rng.integers(0, 5, n)
            for i, part in enumerate(np.array_split(np.arange(n), 4)):
                pd.DataFrame({"features": list(x[part]), "label": y[part]}).to_parquet(
                    out / split / f"part-{i}.parquet"
                )
        (out / "done").touch()
    return out


def image_folder(files: int) -> Path:
    from PIL import Image

    out = WORK / f"pngs-{files}"
    if not (out / "done").exists():
        rng = np.random.default_rng(0)
        for split, n in (("train", files), ("test", max(files // 10, 30))):
            for i in range(n):
                c = i % 3
                (out / split / f"c{c}").mkdir(parents=True, exist_ok=True)
                Image.fromarray((rng.random((32, 32, 3)) * 60 + c * 60).astype(np.uint8)).save(
                    out / split / f"c{c}" / f"{i:06d}.png"
                )
        (out / "done").touch()
    return out


def exported_images(pngs: Path) -> Path:
    """The image folder exported to Parquet by `raylab data export` (a recipe file naming the folder)."""
    out = pngs.parent / f"{pngs.name}-parquet"
    if not (out / "raylab-data.json").exists():
        recipe = WORK / "pngs_recipe.py"
        recipe.write_text(f"""from raylab.data import stream
from recipes.fashion import RECIPE as FASHION
RECIPE = FASHION.variant(
    name="pngs", data=stream.images({str(pngs / "train")!r}, {str(pngs / "test")!r}, size=(32, 32))
)
""")
        subprocess.run(
            [PY, "-m", "raylab", "data", "export", str(recipe), str(out)],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    return out


def make_items(ids: np.ndarray, split: str) -> dict:
    """The generator source's items: a 32x32x3 uint8 image and a label per id, deterministic in the id."""
    x = ((ids[:, None] * 2654435761 + np.arange(32 * 32 * 3)[None, :]) % 251).astype(np.uint8)
    return {"x": x.reshape(len(ids), 32, 32, 3), "y": (ids % 3).astype(np.int64)}


def streams(args) -> dict:
    from raylab.data import stream

    pq = pandas_parquet(args.pandas_rows)
    pngs = image_folder(args.images)
    return {
        "exported": (
            stream.parquet(str(exported_fashion())),
            lambda: plain_parquet(exported_fashion() / "train", ("x", "y")),
        ),
        "pandas": (
            stream.parquet(train=str(pq / "train"), test=str(pq / "test"), inputs="features", targets="label"),
            lambda: plain_parquet(pq / "train", ("features", "label")),
        ),
        "images": (
            stream.images(str(pngs / "train"), str(pngs / "test"), size=(32, 32)),
            lambda: plain_images(pngs / "train"),
        ),
        "generator": (stream.generator(make_items, args.generated, 1024), lambda: plain_generator(args.generated)),
        "images-export": (
            stream.parquet(str(exported_images(pngs))),
            lambda: plain_parquet(exported_images(pngs) / "train", ("x", "y")),
        ),
    }


# -- the plain readers (one process, no Ray) --------------------------------------------------------------------
def plain_parquet(folder: Path, names):
    """A pass: each file read by pyarrow (in a shuffled order), its columns made arrays, rows shuffled, batches cut."""
    import pyarrow.parquet as pq

    from raylab.data.chunks import dense

    files = sorted(folder.glob("*.parquet"))

    def one_pass(rng):
        for f in rng.permutation(len(files)):
            cols = dense(pq.read_table(files[f], columns=list(names)), names)
            order = rng.permutation(len(cols[names[0]]))
            for lo in range(0, len(order) - BATCH + 1, BATCH):
                idx = order[lo : lo + BATCH]
                yield {k: v[idx] for k, v in cols.items()}

    return one_pass


def plain_images(folder: Path):
    """A pass: every file, in a shuffled order, decoded by PIL into a batch array."""
    from PIL import Image

    files = sorted(str(p) for p in folder.glob("*/*.png"))
    labels = np.array([int(Path(p).parent.name[1:]) for p in files])

    def one_pass(rng):
        order = rng.permutation(len(files))
        for lo in range(0, len(order) - BATCH + 1, BATCH):
            x = np.empty((BATCH, 32, 32, 3), np.uint8)
            for i, f in enumerate(order[lo : lo + BATCH]):
                with Image.open(files[f]) as im:
                    x[i] = np.asarray(im if im.mode == "RGB" else im.convert("RGB"))
            yield {"x": x, "y": labels[order[lo : lo + BATCH]]}

    return one_pass


def plain_generator(n: int):
    def one_pass(rng):
        for lo in range(0, n - BATCH + 1, BATCH):
            yield make_items(np.arange(lo, lo + BATCH), "train")

    return one_pass


def plain_rate(make_pass, passes: int) -> dict:
    """Timed as raylab's side: from the second pass's first batch to the last pass's first batch."""
    one_pass = make_pass()
    rng = np.random.default_rng(0)
    t0, rows, first = time.perf_counter(), 0, None
    for p in range(passes):
        for i, b in enumerate(one_pass(rng)):
            if first is None:
                first = time.perf_counter() - t0
            if i == 0 and p == 1:
                t1 = time.perf_counter()
            if p == passes - 1:
                return {"samples_per_s": rows / (time.perf_counter() - t1), "first_batch_s": first}
            if p >= 1:
                rows += len(next(iter(b.values())))
    raise ValueError("--passes: at least 3 a source")


# -- the reader and cutter alone (--cutter) --------------------------------------------------------------------------
CUTTER_ROWS = {
    "exported": ((28, 28), np.uint8, 60000),
    "pandas": ((20,), np.float32, 12000),
    "images": ((32, 32, 3), np.uint8, 20000),
}


def cutter_rate(shape, dtype, rows: int, passes: int = 3, window: bool = False) -> float:
    """Rows/s of a Reader and a Delivery over `passes` passes of dense chunks (as the reader makes them from Ray
    Data's), cut into torch batches; window: the shuffle window held to a quarter of the split."""
    from raylab.data.chunks import chunk_rows
    from raylab.data.deliver import Delivery, Reader
    from raylab.frameworks.torch.task import to_tensors

    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 255, (rows, *shape)).astype(dtype), rng.integers(0, 10, rows)
    n = chunk_rows(BATCH)
    chunks = [{"x": x[i : i + n], "y": y[i : i + n]} for i in range(0, rows, n)]
    steps, held = rows // BATCH, None
    if window:
        from raylab.data import shuffle

        held, shuffle.WINDOW_BYTES = shuffle.WINDOW_BYTES, (x.nbytes + y.nbytes) // 4
    try:
        t0 = time.perf_counter()
        delivery = Delivery(
            Reader(lambda: iter(chunks), ("x", "y")),
            BATCH,
            0,
            lambda c: (c["x"], c["y"]),
            lambda xy, lo, hi: (to_tensors(xy[0][lo:hi]), to_tensors(xy[1][lo:hi])),
            steps * passes,
        )
        for _ in range(steps * passes):
            delivery.next()
        rate = steps * passes * BATCH / (time.perf_counter() - t0)
        delivery.close()
    finally:
        if held is not None:
            shuffle.WINDOW_BYTES = held
    return rate


def cutter(rounds: int) -> None:
    import importlib.util

    import raylab

    windowed = importlib.util.find_spec("raylab.data.shuffle") is not None
    cutter_rate((20,), np.float32, 4096, passes=1)  # torch's import and the threads' first start, not timed
    got: dict = {}
    for _ in range(rounds):
        for name, (shape, dtype, rows) in CUTTER_ROWS.items():
            got.setdefault(name, []).append(cutter_rate(shape, dtype, rows))
            if windowed:
                got.setdefault(f"{name} window", []).append(cutter_rate(shape, dtype, rows, window=True))
    print(f"reader + cutter alone ({raylab.__file__}), rows/s, median (min..max) of {rounds} round(s), batch {BATCH}")
    for name, rates in got.items():
        print(f"{name:17} {np.median(rates):12,.0f} ({min(rates):,.0f}..{max(rates):,.0f})")


# -- raylab's side: a 1-worker Ray Train group, the torch trial's batch source, a step that does nothing -------------
def raylab_rate(stream, passes: int) -> dict:
    from ray.train import DataConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from raylab.data.opened import open_stream

    opened = open_stream(stream)
    out = Path(tempfile.mkdtemp()) / "delivery.json"

    def loop(config):
        from raylab.data.shard import StreamShard
        from raylab.frameworks.torch.task import to_tensors
        from raylab.loop import StreamBatches

        t0 = time.perf_counter()
        info = config["info"]
        steps = info.train_items // BATCH
        data = StreamShard(info, 1, lambda x, y: (x, y), epochs=config["passes"])
        source = StreamBatches(data.batches(BATCH, 0, convert=lambda xy: (to_tensors(xy[0]), to_tensors(xy[1]))), steps)
        source.next()
        first = time.perf_counter() - t0
        for _ in range(steps):  # the first pass: what was read ahead while it started is not counted
            source.next()
        t1 = time.perf_counter()  # the second pass's first batch
        timed = steps * (config["passes"] - 2)
        for _ in range(timed):  # to the last pass's first batch
            source.next()
        rate = timed * BATCH / (time.perf_counter() - t1)
        source.close()
        Path(config["out"]).write_text(
            json.dumps({"samples_per_s": rate, "first_batch_s": first, "passes": source.delivery.passes})
        )

    trainer = DataParallelTrainer(
        loop,
        train_loop_config={"info": opened.info, "passes": passes, "out": str(out)},
        scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 1}),
        datasets=opened.datasets,
        dataset_config=DataConfig(datasets_to_split=["train"]),
    )
    trainer.fit()
    return json.loads(out.read_text())


TABLE_RECIPE = '''"""A 5-class, 20-feature table pandas wrote (a list<float> column, four files), streamed
(bench/studies/delivery.py)."""
import os

from raylab import Recipe, main, optimizer
from raylab.data import stream


def tf_model(keras=None):
    import keras

    return keras.Sequential([keras.Input((20,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(5)])


def torch_model():
    from torch import nn

    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))


D = os.environ["TABLE_DIR"]
RECIPE = Recipe(name="table", data=stream.parquet(train=f"{D}/train", test=f"{D}/test", inputs="features",
                                                  targets="label"),
                models={"tf": tf_model, "torch": torch_model}, batch_per_replica=64, epochs=5,
                loss="sparse_categorical_crossentropy", optimizer=optimizer("adam", 1e-3), metrics=("accuracy",))
if __name__ == "__main__":
    main(RECIPE)
'''


def trials(args) -> None:
    from mlflow.tracking import MlflowClient

    table = pandas_parquet(args.pandas_rows)
    recipe = WORK / "table_recipe.py"
    recipe.write_text(TABLE_RECIPE)
    uri = f"sqlite:///{WORK}/trials.db"
    runs = {
        "pandas table": [str(recipe)],
        "fashion export": [str(ROOT / "recipes" / "fashion.py"), "--data", str(exported_fashion()), "--epochs", "3"],
    }
    client = MlflowClient(tracking_uri=uri)
    print(
        f"{'data':15} {'trial':14} {'samples/s':>10} {'input wait':>10} {'first wait s':>12} "
        f"{'first chunk s':>13}  start-up"
    )
    for name, cmd in runs.items():
        out = Path(tempfile.mkdtemp()) / "summary.json"
        done = subprocess.run(
            [PY, *cmd, "--trials", args.trials, "--tracking-uri", uri, "--json", str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "TABLE_DIR": str(table), "PYTHONPATH": str(ROOT)},
        )
        if done.returncode != 0:
            raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
        for t in json.loads(out.read_text())["trials"]:
            m = client.get_run(t["run_id"]).data.metrics
            phases = " + ".join(f"{k[8:-2]} {m[k]:.1f}" for k in m if k.startswith("startup_") and k != "startup_s")
            print(
                f"{name:15} {t['trial']:14} {m['samples_per_sec']:10,.0f} {m['input_wait_share']:10.1%} "
                f"{m.get('stream_first_wait_s', float('nan')):12.2f} "
                f"{m.get('stream_first_chunk_s', float('nan')):13.2f}"
                f"  {m['startup_s']:.1f} s = {phases}",
                flush=True,
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sources", default="exported,pandas,images,generator")
    p.add_argument("--pandas-rows", type=int, default=12000)
    p.add_argument("--images", type=int, default=20000)
    p.add_argument("--generated", type=int, default=20000)
    p.add_argument("--passes", type=str, default="exported=5,pandas=21,images=5,generator=5,images-export=5")
    p.add_argument("--trials", help="run these trials on the pandas table and the fashion export instead")
    p.add_argument("--cutter", action="store_true", help="time the reader and cutter alone, without Ray")
    args = p.parse_args()
    if args.cutter:
        return cutter(args.rounds)
    if args.trials:
        WORK.mkdir(parents=True, exist_ok=True)
        return trials(args)
    passes = {k: int(v) for k, v in (kv.split("=") for kv in args.passes.split(","))}
    WORK.mkdir(parents=True, exist_ok=True)

    import logging

    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    data_cpus = 1  # the cluster's 2 CPUs less the training worker's
    sources = {k: v for k, v in streams(args).items() if k in args.sources.split(",")}
    got: dict = {k: {"raylab": [], "plain": []} for k in sources}
    for r in range(args.rounds):
        for name, (stream, plain) in sources.items():
            for side in ("raylab", "plain") if r % 2 == 0 else ("plain", "raylab"):
                fig = raylab_rate(stream, passes[name]) if side == "raylab" else plain_rate(plain, passes[name])
                got[name][side].append(fig)
                print(
                    f"round {r} {name:9} {side:6} {fig['samples_per_s']:10,.0f} samples/s  first batch "
                    f"{fig['first_batch_s']:.2f} s",
                    flush=True,
                )
    ray.shutdown()
    print(
        f"\nraylab per data CPU ({data_cpus}) / plain one-process reader, medians of {args.rounds} round(s), "
        f"batch {BATCH}, "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"{'source':10} {'passes':>6} {'raylab/s':>10} {'plain/s':>10} {'ratio':>6} {'range':>13} "
        f"{'1st raylab':>10} {'1st plain':>9}"
    )
    for name, sides in got.items():
        ratios = [a["samples_per_s"] / data_cpus / b["samples_per_s"] for a, b in zip(sides["raylab"], sides["plain"])]
        med = {s: float(np.median([f["samples_per_s"] for f in sides[s]])) for s in sides}
        first = {s: float(np.median([f["first_batch_s"] for f in sides[s]])) for s in sides}
        print(
            f"{name:10} {passes[name]:6} {med['raylab']:10,.0f} {med['plain']:10,.0f} {np.median(ratios):6.2f} "
            f"{min(ratios):6.2f}..{max(ratios):5.2f} {first['raylab']:9.2f}s {first['plain']:8.2f}s"
        )


if __name__ == "__main__":
    main()
