"""Plain PyTorch baseline: the fashion MLP, no Ray, no raylab, no DDP, one process.

Same model (Glorot-uniform weights, zero biases), Adam 5e-4 / eps 1e-7, batch 32, 1 thread,
the same loop (index a shuffled in-memory tensor, loss.item() every step) and the same timing
as raylab's torch trials. Prints one JSON line.

    python bench/plain_torch.py --epochs 2
"""

import argparse
import gzip
import json
import time

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    shape = np.frombuffer(raw[4 : 4 + 4 * ndim], dtype=">u4")
    return np.frombuffer(raw[4 + 4 * ndim :], dtype=np.uint8).reshape(shape)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()

    import torch
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.from_numpy(read_idx(f"{args.data}/train-images-idx3-ubyte.gz").astype("float32") / 255.0)
    y = torch.from_numpy(read_idx(f"{args.data}/train-labels-idx1-ubyte.gz").astype("int64"))
    batch, steps = 32, len(x) // 32
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    times = []
    for _ in range(args.epochs):
        for idx in torch.randperm(len(x))[: steps * batch].split(batch):
            t0 = time.perf_counter()
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            opt.step()
            loss.item(), float((logits.argmax(1) == yb).sum())
            times.append(time.perf_counter() - t0)
    steady = np.asarray(times[args.warmup :])
    print(json.dumps({"impl": "plain_torch", "samples_per_sec": batch * steady.size / steady.sum(),
                      "step_time_p50_ms": float(np.percentile(steady, 50) * 1e3),
                      "step_time_p90_ms": float(np.percentile(steady, 90) * 1e3), "first_step_s": times[0]}))


if __name__ == "__main__":
    main()
