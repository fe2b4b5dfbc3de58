"""At which steps does the fashion MLP's XLA training step compile again? One process, PJRT on CPU.

The `xla:single` trial flags compilations after warm-up (`recompiles` in `raylab compare`). This
runs the same step (MLP, Adam lr 5e-4 eps 1e-7, batch 32, dropout, the loss and accuracy read back
every step) on one fixed batch for --steps steps and prints every step at which torch_xla's
`UncachedCompile` counter rose, with the Python scalars torch.optim.Adam hands to XLA at that step
when it computes its bias corrections on the host (the default; they change every step).
`--capturable` keeps Adam's step count and bias corrections on the device, as the xla trials and
raylab/frameworks/plain.py do.

    python bench/studies/xla_recompiles.py --steps 17000                 # compiles again at steps 6212 and 16628
    python bench/studies/xla_recompiles.py --steps 17000 --capturable    # only the 2 warm-up compilations
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=19000, help="training steps (default: %(default)s, 10 epochs)")
    p.add_argument(
        "--capturable",
        action="store_true",
        help="Adam(capturable=True): step count and bias corrections stay on the device",
    )
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps must be at least 1")
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import numpy as np
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    from raylab.models.mlp import torch_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = torch_xla.device()
    model = torch_model().to(device).train()
    beta1, beta2, lr = 0.9, 0.999, 5e-4
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(beta1, beta2), eps=1e-7, capturable=args.capturable)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.rand(32, 28, 28).to(device), torch.randint(0, 10, (32,)).to(device)
    seen = 0
    print(
        f"capturable={args.capturable} XLA_NO_SPECIAL_SCALARS={os.environ.get('XLA_NO_SPECIAL_SCALARS', '')!r}",
        flush=True,
    )
    for n in range(1, args.steps + 1):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        stats = torch.stack([loss.detach(), (logits.argmax(1) == y).sum().float()])
        opt.step()
        torch_xla.sync()
        stats.cpu()
        count = met.counter_value("UncachedCompile") or 0
        if count != seen:
            bc1, bc2 = 1 - beta1**n, 1 - beta2**n  # what Adam computes on the host from its step count
            scalars = (
                ""
                if args.capturable
                else (
                    f"; Adam's host scalars: step size {lr / bc1!r}, sqrt(bias correction 2) {bc2**0.5!r} "
                    f"(float32: {float(np.float32(bc2**0.5))!r})"
                )
            )
            print(f"step {n}: compilations {seen} -> {count}{scalars}", flush=True)
            seen = count
    print(f"{args.steps} steps, {seen} compilations")


if __name__ == "__main__":
    main()
