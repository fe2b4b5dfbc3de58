"""Plain PyTorch/XLA baseline: the fashion MLP on one PJRT device, no Ray, no raylab.

Same model, optimizer, batch 32, threads and loop as raylab's xla:single trial: a DataLoader
(drop_last) behind MpDeviceLoader, torch_xla.sync() every step, loss read back every step.
Reports steady-state samples/s after 20 warm-up steps and the compile count and time.

    PJRT_DEVICE=CPU python bench/plain_xla.py --epochs 2
"""

import os
import time

from common import fashion_train, parse_args, report


def main():
    args = parse_args(__doc__)
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    os.environ.setdefault("CPU_NUM_DEVICES", "1")
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'}")

    import torch
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.distributed.parallel_loader as pl
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x, y = (torch.from_numpy(a) for a in fashion_train(args.data))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True,
                                         drop_last=True, generator=torch.Generator().manual_seed(0))
    device = torch_xla.device()
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    times, warm = [], None
    for _ in range(args.epochs):
        batches = iter(pl.MpDeviceLoader(loader, device))
        for _ in range(len(loader)):
            t0 = time.perf_counter()
            xb, yb = next(batches)
            opt.zero_grad(set_to_none=True)
            logits = model(xb)
            loss = loss_fn(logits, yb)
            loss.backward()
            stats = torch.stack([loss.detach(), (logits.argmax(1) == yb).sum().float()])
            opt.step()
            torch_xla.sync()
            stats.cpu().tolist()
            times.append(time.perf_counter() - t0)
            if len(times) == args.warmup:
                warm = met.metric_data("CompileTime")
    end = met.metric_data("CompileTime")
    report("plain_xla", times, args.warmup, 32, compile_count_warmup=int(warm[0]),
           compile_time_warmup_s=warm[1] / 1e9, compiles_after_warmup=int(end[0] - warm[0]))


if __name__ == "__main__":
    main()
