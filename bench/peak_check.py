"""Does `raylab peak` report what a plain matrix-product loop reaches? Side by side, alternating, in one run: the
peak probe (raylab/frameworks/peak.py, through raylab/probes/peak.py) and the loop a careful user writes (a fresh
process, the framework's threads set, products of two n x n float32 matrices timed over a few seconds) for torch,
jax and TF. Prints each pair and their ratio.

    python bench/peak_check.py --threads 1 --size 1024 --seconds 3 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PLAIN = {
    "torch": """
import time, torch
torch.set_num_threads({threads})
a, b = torch.randn({n}, {n}), torch.randn({n}, {n})
for _ in range(3): a @ b
k, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    c = a @ b; k += 1
print(2 * {n} ** 3 * k / (time.perf_counter() - t0) / 1e12)
""",
    "jax": """
import time, jax, jax.numpy as jnp
jax.config.update("jax_default_matmul_precision", "highest")
a, b = jnp.ones(({n}, {n})), jnp.ones(({n}, {n})) * 0.5
f = jax.jit(jnp.matmul)
f(a, b).block_until_ready()
k, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    f(a, b).block_until_ready(); k += 1
print(2 * {n} ** 3 * k / (time.perf_counter() - t0) / 1e12)
""",
    "tf": """
import time, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads({threads}); tf.config.threading.set_inter_op_parallelism_threads(1)
a, b = tf.random.normal(({n}, {n})), tf.random.normal(({n}, {n}))
for _ in range(3): tf.matmul(a, b).numpy()
k, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < {seconds}:
    tf.matmul(a, b).numpy(); k += 1
print(2 * {n} ** 3 * k / (time.perf_counter() - t0) / 1e12)
""",
}


def plain(name: str, threads: int, n: int, seconds: float) -> float:
    from raylab import registry

    code = PLAIN[name].format(threads=threads, n=n, seconds=seconds)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env=registry.framework(name).plain_env(threads),
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", default="torch,jax,tf")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    from raylab.probes.peak import probe

    print(
        f"{args.size} x {args.size} float32 products, {args.threads} thread(s), {args.seconds:g} s a figure, "
        f"{args.rounds} round(s), alternating; os.cpu_count() {os.cpu_count()}"
    )
    print(f"{'framework':<10} {'raylab peak GFLOP/s':>20} {'plain loop GFLOP/s':>19} {'peak / plain':>13}")
    for name in args.frameworks.split(","):
        ours, theirs = [], []
        for r in range(args.rounds):
            pair = [
                lambda: probe(name, "fp32", "cpu", args.threads, args.size, args.seconds)["tflops"],
                lambda: plain(name, args.threads, args.size, args.seconds),
            ]
            got = [f() for f in (pair if r % 2 == 0 else pair[::-1])]
            ours.append(got[0] if r % 2 == 0 else got[1])
            theirs.append(got[1] if r % 2 == 0 else got[0])
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{name:<10} {a * 1000:>20,.1f} {b * 1000:>19,.1f} {a / b:>12.2f}x", flush=True)
    print(json.dumps({"threads": args.threads, "size": args.size}))


if __name__ == "__main__":
    main()
