"""Does running inside Ray make a training step slower? One torch step, five hosts, interleaved.

The fashion MLP's torch step (batch 32, 1 intra-op thread, the same indexing, loss, backward,
Adam step and accuracy count as a `torch:none` trial) runs for --steps steps in each of:

    process       this process, main thread (as raylab/plain.py runs it)
    thread        this process, a second thread
    actor         a Ray actor's method
    actor-thread  a thread started inside a Ray actor
    ray-train     a Ray Train TorchTrainer worker with one worker (how raylab runs torch:none)

in rounds, the hosts in turn, and prints the median wall time and the median thread CPU time of
a step after --warmup steps. A host that made the step wait (the GIL held by Ray's own threads,
a worker descheduled) would show wall above CPU time; a host that added work would show more CPU
time per step than the others, round after round. Random data of Fashion-MNIST's shape: the step
does not depend on the values.

    python bench/hosting.py --rounds 3
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

ROOT = Path(__file__).resolve().parents[1]
HOSTS = ("process", "thread", "actor", "actor-thread", "ray-train")


def steps(n: int, warmup: int) -> dict:
    import torch

    from raylab.models.mlp import torch_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x, y = torch.rand(60000, 28, 28), torch.randint(0, 10, (60000,))
    model = torch_model().train()
    opt = torch.optim.Adam(model.parameters(), lr=5e-4, eps=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[: len(x) // 32 * 32].split(32)
    wall, cpu = [], []
    for i in range(n):
        idx = order[i % len(order)]
        t0, c0 = time.perf_counter(), time.thread_time()
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = loss_fn(logits, yb)
        loss.backward()
        opt.step()
        loss.item(), float((logits.argmax(1) == yb).sum())
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return {"wall_ms": 1e3 * statistics.median(wall[warmup:]), "cpu_ms": 1e3 * statistics.median(cpu[warmup:]),
            "threads": threading.active_count(), "nice": os.nice(0)}


def in_thread(n: int, warmup: int) -> dict:
    out: dict = {}
    t = threading.Thread(target=lambda: out.update(steps(n, warmup)))
    t.start()
    t.join()
    return out


def on(host: str, n: int, warmup: int) -> dict:
    import ray

    if host == "process":
        return steps(n, warmup)
    if host == "thread":
        return in_thread(n, warmup)
    if host in ("actor", "actor-thread"):
        @ray.remote(num_cpus=1)
        class Host:
            def run(self, threaded: bool) -> dict:
                return in_thread(n, warmup) if threaded else steps(n, warmup)

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
            Path(config["out"]).write_text(json.dumps(steps(n, warmup)))

        TorchTrainer(loop, train_loop_config={"out": str(out)}, scaling_config=ScalingConfig(num_workers=1),
                     run_config=RunConfig(storage_path=tmp)).fit()
        return json.loads(out.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=2500, help="steps per host and round (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=100, help="steps left out of the medians (default: %(default)s)")
    args = p.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.steps <= args.warmup:
        p.error("--rounds must be at least 1 and --steps greater than --warmup")
    import ray

    sys.path.insert(0, str(ROOT))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        rows = {h: [] for h in HOSTS}
        print(f"{'round':>5}  {'host':<12}  {'wall ms':>8}  {'cpu ms':>8}  threads  nice", flush=True)
        for r in range(1, args.rounds + 1):
            for host in HOSTS:
                res = on(host, args.steps, args.warmup)
                rows[host].append(res)
                print(f"{r:>5}  {host:<12}  {res['wall_ms']:>8.3f}  {res['cpu_ms']:>8.3f}  {res['threads']:>7}  "
                      f"{res['nice']:>4}", flush=True)
        print("\nmedian over rounds, ms per step (wall / thread CPU):")
        base = statistics.median(r["wall_ms"] for r in rows["process"])
        for host, res in rows.items():
            wall = statistics.median(r["wall_ms"] for r in res)
            cpu = statistics.median(r["cpu_ms"] for r in res)
            spread = f"{min(r['wall_ms'] for r in res):.3f}..{max(r['wall_ms'] for r in res):.3f}"
            print(f"  {host:<12}  {wall:.3f} / {cpu:.3f}  (wall {spread})  {base / wall:.3f}x process's steps/s")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
