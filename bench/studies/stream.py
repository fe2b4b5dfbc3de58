"""Streamed against in-memory data: accuracy and speed per framework, the pipeline's own delivery rate, and
the memory a streamed trial holds as the dataset on disk grows.

    parity    Fashion-MNIST exported to Parquet (`raylab data export`) and trained from it, beside the same
              trials on in-memory arrays, same seed, epochs and batch; one process per side, the order
              alternating between rounds. Prints each trial's test accuracy on both sides, the difference,
              steady samples/s on both sides and their ratio, and the streamed side's input_wait_share.
                flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/stream.py parity --epochs 2
                flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/stream.py parity --recipe fashion_cnn \
                    --trials torch:none,tf:none --steps-per-epoch 300
    delivery  samples/s a 1-worker Ray Train group takes from a stream with a step that does nothing (the
              same StreamShard and StreamBatches a torch trial uses): the 1.2M-scene generator and the
              exported Fashion-MNIST Parquet.
                flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/stream.py delivery
    memory    Parquet datasets of 64x64x3 uint8 images (random) of about --sizes GB on disk, each streamed
              through a 1-worker torch:none and tf:none trial (--steps steps of batch 64); the driver's peak
              RSS (its own getrusage) and, polled from /proc while it runs, the peak RSS (VmHWM, which counts
              object-store pages a process maps) and peak private memory (RssAnon) of the training worker
              and of the largest other Ray process (Ray Data's read and map tasks).
                flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/stream.py memory --sizes 2,16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
PY = sys.executable
WORK = Path(os.environ.get("RAYLAB_BENCH_DIR", tempfile.gettempdir())) / "raylab-bench-stream"


def run_recipe(recipe: str, args: list[str], uri: str) -> dict:
    out = Path(tempfile.mkdtemp()) / "summary.json"
    cmd = [PY, str(ROOT / "recipes" / f"{recipe}.py"), "--tracking-uri", uri, "--json", str(out), *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


def trial_figures(uri: str, summary: dict) -> dict:
    from mlflow.tracking import MlflowClient

    client, rows = MlflowClient(tracking_uri=uri), {}
    for t in summary["trials"]:
        m = client.get_run(t["run_id"]).data.metrics
        rows[t["trial"]] = {
            "acc": m.get("val_accuracy"),
            "sps": m.get("samples_per_sec"),
            "wait": m.get("input_wait_share"),
        }
    return rows


def exported_fashion() -> Path:
    out = WORK / "fashion-parquet"
    if not (out / "raylab-data.json").exists():
        subprocess.run(
            [PY, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"), str(out)], check=True
        )
    return out


def parity(args) -> None:
    data = exported_fashion() if args.recipe in ("fashion", "fashion_cnn") else None
    uri = f"sqlite:///{WORK}/parity.db"
    common = [
        "--trials",
        args.trials,
        "--epochs",
        str(args.epochs),
        "--seed",
        "0",
        *(["--steps-per-epoch", str(args.steps_per_epoch)] if args.steps_per_epoch else []),
        *(["--batch", str(args.batch)] if args.batch else []),
    ]
    sides: dict[str, list[dict]] = {"memory": [], "streamed": []}
    for r in range(args.rounds):
        order = ["memory", "streamed"] if r % 2 == 0 else ["streamed", "memory"]
        for side in order:
            extra = ["--data", str(data)] if side == "streamed" else []
            sides[side].append(trial_figures(uri, run_recipe(args.recipe, common + extra, uri)))
            print(f"round {r} {side}: {sides[side][-1]}", flush=True)
    print(f"\n{args.recipe}: {' '.join(common)} ({args.rounds} round(s), medians)")
    print(
        f"{'trial':16} {'acc mem':>8} {'acc str':>8} {'diff':>7} {'sps mem':>9} {'sps str':>9} {'ratio':>6} "
        f"{'wait str':>8}"
    )
    for trial in sides["memory"][0]:

        def med(side, key):
            return float(np.median([rnd[trial][key] for rnd in sides[side] if rnd[trial][key] is not None]))

        am, ast, sm, ss = med("memory", "acc"), med("streamed", "acc"), med("memory", "sps"), med("streamed", "sps")
        print(
            f"{trial:16} {am:8.4f} {ast:8.4f} {ast - am:+7.4f} {sm:9,.0f} {ss:9,.0f} {ss / sm:6.3f} "
            f"{med('streamed', 'wait'):8.3f}"
        )


def delivery(args) -> None:
    import ray
    from ray.train import DataConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from raylab.data.scenes import SEED_SCENES, scene_stream
    from raylab.data.opened import open_stream
    from raylab.data.stream import parquet

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="ERROR")
    sources = {
        "scenes generator (1.2M x 96x96x3)": (scene_stream(SEED_SCENES, 144), args.scene_batches, 32),
        "fashion parquet (60k x 28x28)": (parquet(str(exported_fashion())), args.parquet_batches, 256),
    }
    for name, (stream, batches, batch) in sources.items():
        opened = open_stream(stream)

        def loop(config):
            from raylab.loop import StreamBatches
            from raylab.data.shard import StreamShard

            data = StreamShard(config["info"], 1, lambda x, y: (x, y))
            source = StreamBatches(data.batches(config["batch"], 0), config["n"] + 10)
            for _ in range(10):  # the pipeline's start-up left out
                source.next()
            t0 = time.perf_counter()
            for _ in range(config["n"]):
                source.next()
            rate = config["n"] * config["batch"] / (time.perf_counter() - t0)
            Path(config["out"]).write_text(json.dumps({"samples_per_s": rate}))  # the bench runs on one machine

        out = WORK / "delivery.json"
        trainer = DataParallelTrainer(
            loop,
            train_loop_config={"info": opened.info, "batch": batch, "n": batches, "out": str(out)},
            scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 1}),
            datasets=opened.datasets,
            dataset_config=DataConfig(datasets_to_split=["train"]),
        )
        trainer.fit()
        print(
            f"{name}: {json.loads(out.read_text())['samples_per_s']:,.0f} samples/s delivered "
            f"(batch {batch}, {batches} batches, {os.cpu_count()} CPUs, 1 training worker)",
            flush=True,
        )
    ray.shutdown()


ITEM = (64, 64, 3)


def write_images(directory: Path, gb: float) -> int:
    """Random uint8 images and labels as Parquet (Ray Data tensor columns), about `gb` GB; returns the items."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ray.data.extensions import ArrowTensorArray

    per_file = 8192
    n = int(gb * 1e9 / np.prod(ITEM)) // per_file * per_file
    if (directory / "raylab-data.json").exists():
        return json.loads((directory / "raylab-data.json").read_text())["train_items"]
    rng = np.random.default_rng(0)
    for split, items in (("train", n), ("test", per_file)):
        (directory / split).mkdir(parents=True, exist_ok=True)
        for i in range(items // per_file):
            x = rng.integers(0, 256, size=(per_file, *ITEM), dtype=np.uint8)
            y = rng.integers(0, 10, size=per_file)
            pq.write_table(
                pa.table({"x": ArrowTensorArray.from_numpy(x), "y": pa.array(y)}),
                directory / split / f"part-{i:05d}.parquet",
                compression="none",
            )
    (directory / "raylab-data.json").write_text(
        json.dumps(
            {
                "name": f"random-{gb:g}gb",
                "inputs": "x",
                "targets": "y",
                "train_items": n,
                "test_items": per_file,
                "source": f"random 64x64x3 uint8 images in {directory}",
            }
        )
    )
    return n


class PeakRSS(threading.Thread):
    """Per kind of Ray process (training worker, Ray Data task or actor), the highest VmHWM (peak RSS, which
    counts the object store's shared pages a process touched) and the highest RssAnon polled (its private
    memory: what the process itself holds)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[str, float] = {}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    title = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                    status = (proc / "status").read_text()
                except OSError:
                    continue
                if not title.startswith("ray::"):
                    continue
                kind = "training worker" if title.startswith("ray::RayTrainWorker") else "other ray processes"
                fields = {w[0].rstrip(":"): w[1] for w in map(str.split, status.splitlines()) if len(w) > 1}
                for key, figure in ((kind, "VmHWM"), (kind + " private", "RssAnon")):
                    self.peaks[key] = max(self.peaks.get(key, 0), int(fields.get(figure, 0)) / 1024)
            time.sleep(0.5)


def memory(args) -> None:
    rows = []
    for gb in [float(s) for s in args.sizes.split(",")]:
        directory = WORK / f"images-{gb:g}gb"
        t0 = time.time()
        items = write_images(directory, gb)
        size = sum(f.stat().st_size for f in directory.rglob("*.parquet")) / 1e9
        print(
            f"{directory}: {items:,} items, {size:.1f} GB on disk ({time.time() - t0:.0f}s to write or find)",
            flush=True,
        )
        for trial in args.trials.split(","):
            watch = PeakRSS()
            watch.start()
            out = subprocess.run(
                [PY, __file__, "_trial", str(directory), trial, str(args.steps)], capture_output=True, text=True
            )
            watch.stop.set()
            watch.join()
            if out.returncode != 0:
                raise SystemExit(out.stderr[-3000:])
            driver = json.loads(out.stdout.strip().splitlines()[-1])["driver_peak_rss_mb"]
            p = watch.peaks
            if not p.get("training worker"):
                raise SystemExit("the /proc watcher saw no training worker: its figures would be zeros")
            rows.append(
                (
                    f"{size:.1f} GB",
                    trial,
                    driver,
                    p.get("training worker", 0),
                    p.get("training worker private", 0),
                    p.get("other ray processes", 0),
                    p.get("other ray processes private", 0),
                )
            )
            print(rows[-1], flush=True)
    print(
        f"\n{'dataset':>9} {'trial':12} {'driver MB':>10} {'worker MB':>10} {'(private)':>10} "
        f"{'ray other MB':>12} {'(private)':>10}"
    )
    for size, trial, d, w, wp, o, op in rows:
        print(f"{size:>9} {trial:12} {d:10,.0f} {w:10,.0f} {wp:10,.0f} {o:12,.0f} {op:10,.0f}")


def memory_trial(directory: str, trial: str, steps: int) -> None:
    """One streamed trial in this process (its driver), a linear model over the images; prints the driver's peak."""
    import resource

    from raylab import Recipe, Scale, optimizer
    from raylab.cli import recipe_main
    from raylab.data.stream import parquet

    def tf_model(keras=None):
        import keras

        return keras.Sequential([keras.Input(ITEM), keras.layers.Flatten(), keras.layers.Dense(10)])

    def torch_model():
        from torch import nn

        return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(ITEM)), 10))

    recipe = Recipe(
        name="stream_memory",
        data=parquet(directory),
        models={"tf": tf_model, "torch": torch_model},
        loss="sparse_categorical_crossentropy",
        optimizer=optimizer("sgd", 1e-3),
        batch_per_replica=64,
        epochs=1,
        steps_per_epoch=steps,
        metrics=("accuracy",),
        preprocess=Scale(1 / 255),
    )
    uri = f"sqlite:///{WORK}/memory.db"
    code = recipe_main(recipe, ["--trials", trial, "--tracking-uri", uri])
    if code != 0:
        raise SystemExit(code)
    print(json.dumps({"driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    if sys.argv[1:2] == ["_trial"]:
        memory_trial(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("parity")
    a.add_argument("--recipe", default="fashion")
    a.add_argument("--trials", default="tf:none,tf:mwms x2,torch:ddp x2,xla:single")
    a.add_argument("--epochs", type=int, default=2)
    a.add_argument("--steps-per-epoch", type=int, default=0)
    a.add_argument("--batch", type=int, default=0)
    a.add_argument("--rounds", type=int, default=1)
    d = sub.add_parser("delivery")
    d.add_argument("--scene-batches", type=int, default=60)
    d.add_argument("--parquet-batches", type=int, default=200)
    m = sub.add_parser("memory")
    m.add_argument("--sizes", default="2,16")
    m.add_argument("--trials", default="torch:none,tf:none")
    m.add_argument("--steps", type=int, default=3000)
    args = p.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    {"parity": parity, "delivery": delivery, "memory": memory}[args.what](args)


if __name__ == "__main__":
    main()
