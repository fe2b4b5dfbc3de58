"""What the plain baselines share, and nothing of raylab's: the IDX reader and the step statistics.

Kept apart from raylab on purpose, so a baseline measures the framework alone.
"""

import argparse
import gzip
import json

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"


def parse_args(doc):
    """The flags every baseline takes; defaults match raylab's trials (1 thread, 20 warm-up steps)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--data", default=DATA)
    return p.parse_args()


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = np.frombuffer(raw[4 : 4 + 4 * ndim], dtype=">u4")
    return np.frombuffer(raw[4 + 4 * ndim :], dtype=np.uint8).reshape(shape)


def fashion_train(data_dir=DATA):
    """(images as float32 in [0, 1], int64 labels) of the training split."""
    x = read_idx(f"{data_dir}/train-images-idx3-ubyte.gz").astype("float32") / 255.0
    y = read_idx(f"{data_dir}/train-labels-idx1-ubyte.gz").astype("int64")
    return x, y


def report(impl, times, warmup, batch, **extra):
    """Prints the steady-state figures as one JSON line, with the names raylab uses."""
    steady = np.asarray(times[warmup:])
    print(json.dumps({"impl": impl, "samples_per_sec": batch * steady.size / steady.sum(),
                      "step_time_p50_ms": float(np.percentile(steady, 50) * 1e3),
                      "step_time_p90_ms": float(np.percentile(steady, 90) * 1e3),
                      "first_step_s": times[0], **extra}))
