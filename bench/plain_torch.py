"""Plain PyTorch baseline: the fashion MLP, no Ray, no raylab, no DDP, one process.

Same model (Glorot-uniform weights, zero biases), Adam 5e-4 / eps 1e-7, batch 32, 1 thread,
the same loop (index a shuffled in-memory tensor, loss.item() every step) and the same timing
as raylab's torch trials. Prints one JSON line.

    python bench/plain_torch.py --epochs 2
"""

import time

from common import fashion_train, parse_args, report


def main():
    args = parse_args(__doc__)

    import torch
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = (torch.from_numpy(a) for a in fashion_train(args.data))
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
    report("plain_torch", times, args.warmup, batch)


if __name__ == "__main__":
    main()
