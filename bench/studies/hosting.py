"""Does running inside Ray make a training step slower? One training step, five hosts, interleaved.

The fashion MLP's step (batch 32, 1 intra-op thread) runs for --steps steps in each host below.
`--framework torch` is a `torch:none` trial's step (the same indexing, loss, backward, Adam step
and accuracy count); `--framework xla` is an `xla:single` trial's (PJRT on CPU with the trial's
environment, MpDeviceLoader, Adam(capturable=True), one sync per step, loss and accuracy read
back). The hosts:

    process       this process, main thread (as raylab/frameworks/plain.py runs it)
    thread        this process, a second thread
    actor         a Ray actor's method
    actor-thread  a thread started inside a Ray actor
    ray-train     a Ray Train TorchTrainer worker with one worker (how raylab runs the trial; for
                  xla with raylab's own XLA backend config)

in rounds, the hosts in turn, and prints the median wall time and the median thread CPU time of
a step after --warmup steps, and the process's CPU time per step over the same steps (XLA runs
part of a step on its own threads, and MpDeviceLoader feeds batches from another). A host that made
the step wait (the GIL held by Ray's own threads, a worker descheduled) would show wall above CPU
time; a host that added work would show more CPU time per step than the others, round after round.
Random data of Fashion-MNIST's shape: the step does not depend on the values.

    python bench/studies/hosting.py --rounds 3
    python bench/studies/hosting.py --rounds 3 --framework xla
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ("process", "thread", "actor", "actor-thread", "ray-train")


def torch_step():
    import torch

    from raylab.frameworks.torch.worker import shuffled_batches
    from raylab.models.mlp import torch_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.rand(60000, 28, 28), torch.randint(0, 10, (60000,))
    model = torch_model().train()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = shuffled_batches(len(x), 32, torch.Generator().manual_seed(0))  # the torch trials' batch order

    def step():
        idx = next(batches)
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = loss_fn(logits, yb)
        loss.backward()
        opt.step()
        loss.item(), float((logits.argmax(1) == yb).sum())

    return step


def xla_step():
    from raylab.frameworks.xla.kinds import worker_env

    os.environ.update(worker_env("CPU", 1))  # before torch_xla is imported, as the trial's backend does
    import torch
    import torch_xla
    import torch_xla.distributed.parallel_loader as pl

    from raylab.models.mlp import torch_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = torch_xla.device()
    data = torch.utils.data.TensorDataset(torch.rand(60000, 28, 28), torch.randint(0, 10, (60000,)))
    loader = pl.MpDeviceLoader(
        torch.utils.data.DataLoader(
            data, batch_size=32, shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(0)
        ),
        device,
    )
    model = torch_model().to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, eps=1e-7, capturable=True)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = iter(())

    def step():
        nonlocal batches
        try:
            xb, yb = next(batches)
        except StopIteration:
            batches = iter(loader)
            xb, yb = next(batches)
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = loss_fn(logits, yb)
        loss.backward()
        stats = torch.stack([loss.detach().float(), (logits.argmax(1) == yb).sum().float()])
        opt.step()
        torch_xla.sync()
        stats.cpu().tolist()

    def close():  # MpDeviceLoader has no close(): stop its ParallelLoader's threads, or they pile up round by round
        if loader._parallel_loader is not None:
            loader._parallel_loader.close()

    step.close = close
    return step


def steps(n: int, warmup: int, framework: str) -> dict:
    step = xla_step() if framework == "xla" else torch_step()
    wall, cpu = [], []
    for i in range(n):
        if i == warmup:
            p0, w0 = time.process_time(), time.perf_counter()
        t0, c0 = time.perf_counter(), time.thread_time()
        step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    # process CPU per step over the steady steps, against their wall time: XLA's own threads and the loader's count
    proc = (time.process_time() - p0) / (n - warmup)
    busy = (time.process_time() - p0) / (time.perf_counter() - w0)
    getattr(step, "close", lambda: None)()
    return {
        "wall_ms": 1e3 * statistics.median(wall[warmup:]),
        "cpu_ms": 1e3 * statistics.median(cpu[warmup:]),
        "proc_ms": 1e3 * proc,
        "cores": busy,
        "threads": threading.active_count(),
        "nice": os.nice(0),
    }


def in_thread(n: int, warmup: int, framework: str) -> dict:
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(steps(n, warmup, framework)))
    t.start()
    t.join()
    return out


def on(host: str, n: int, warmup: int, framework: str) -> dict:
    import ray

    if host == "process":
        return steps(n, warmup, framework)
    if host == "thread":
        return in_thread(n, warmup, framework)
    if host in ("actor", "actor-thread"):

        @ray.remote(num_cpus=1)
        class Host:
            def run(self, threaded: bool) -> dict:
                return in_thread(n, warmup, framework) if threaded else steps(n, warmup, framework)

        actor = Host.remote()
        try:
            return ray.get(actor.run.remote(host == "actor-thread"), timeout=600)
        finally:
            ray.kill(actor)
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"

        def loop(config: dict) -> None:
            Path(config["out"]).write_text(json.dumps(steps(n, warmup, framework)))

        backend = None
        if framework == "xla":
            from raylab.frameworks.xla.kinds import _xla_backend_config

            backend = _xla_backend_config("cpu")
        TorchTrainer(
            loop,
            train_loop_config={"out": str(out)},
            scaling_config=ScalingConfig(num_workers=1),
            run_config=RunConfig(storage_path=tmp),
            torch_config=backend,
        ).fit()
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=2500, help="steps per host and round (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=100, help="steps left out of the medians (default: %(default)s)")
    p.add_argument(
        "--framework",
        choices=("torch", "xla"),
        default="torch",
        help="whose step: a torch:none trial's or an xla:single trial's (default: %(default)s)",
    )
    args = p.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.steps <= args.warmup:
        p.error("--rounds must be at least 1 and --steps greater than --warmup")
    import ray

    sys.path.insert(0, str(ROOT))
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}
    )
    try:
        rows = {h: [] for h in HOSTS}
        print(f"{args.framework} step, {args.steps} steps per host and round, medians after {args.warmup}", flush=True)
        print(
            f"{'round':>5}  {'host':<12}  {'wall ms':>8}  {'cpu ms':>8}  {'proc ms':>8}  cores  threads  nice",
            flush=True,
        )
        for r in range(1, args.rounds + 1):
            for host in HOSTS:
                res = on(host, args.steps, args.warmup, args.framework)
                rows[host].append(res)
                print(
                    f"{r:>5}  {host:<12}  {res['wall_ms']:>8.3f}  {res['cpu_ms']:>8.3f}  {res['proc_ms']:>8.3f}  "
                    f"{res['cores']:>5.2f}  {res['threads']:>7}  {res['nice']:>4}",
                    flush=True,
                )
        print("\nmedian over rounds, ms per step (wall / thread CPU / process CPU):")
        base = statistics.median(r["wall_ms"] for r in rows["process"])
        for host, res in rows.items():
            wall = statistics.median(r["wall_ms"] for r in res)
            cpu = statistics.median(r["cpu_ms"] for r in res)
            proc = statistics.median(r["proc_ms"] for r in res)
            spread = f"{min(r['wall_ms'] for r in res):.3f}..{max(r['wall_ms'] for r in res):.3f}"
            print(
                f"  {host:<12}  {wall:.3f} / {cpu:.3f} / {proc:.3f}  (wall {spread})  "
                f"{base / wall:.3f}x process's steps/s"
            )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
