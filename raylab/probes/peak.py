"""The machine's peak, measured: `raylab peak` times sustained products of two large matrices with each installed
framework (raylab/frameworks/peak.py, one process each, with the framework's thread environment as a plain script has
it), per device, precision and threads, and keeps the figures in ~/.cache/raylab/kept.json (`raylab probes`) for this
host, its CPU and these versions. A trial then records `peak_tflops` (its framework's, on its device, at its applied
precision and threads) and `utilization`: its `achieved_tflops` over that peak times its replicas. A matrix product is
the most a framework gets out of the device; a training step, with its smaller products, elementwise ops and the
optimizer, stays below it.

A trial's share of the peaks: raylab/probes/utilization.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from raylab.probes.utilization import key
from raylab.registry import framework

SIZES = {"cpu": 1024, "gpu": 8192}  # n x n products: large enough to reach the rate, small enough to repeat


def identity() -> dict:
    """What a measured peak is valid for: this host's identity (raylab/probes/host.py), every cache's."""
    from raylab.probes import host

    return host.identity()


def probe(name: str, precision: str, device: str, threads: int, size: int, seconds: float) -> dict:
    """One rate, measured in a process of its own: {"tflops", "best_tflops", ...} or {"error": why}."""

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "raylab.frameworks.peak",
            name,
            precision,
            device,
            str(threads),
            str(size),
            str(seconds),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=framework(name).plain_env(threads),
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {"error": lines[-1][:300]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def load(path: Path | None = None) -> dict:
    """The peaks measured here for these versions (key() -> figures), or {}."""
    from raylab.probes import store

    return {k: e["value"] for _, k, e in store.entries("peak", path, identity())}


def save(peaks: dict, path: Path | None = None) -> Path:
    """Keeps each peak (key() -> figures) in this host's store (raylab/probes/store.py); where they went."""
    from raylab.probes import store

    for k, figures in peaks.items():
        store.keep(
            "peak",
            k,
            figures,
            identity(),
            f"{k}: framework/device/precision/threads, {figures.get('tflops', 0) * 1000:,.1f} GFLOP/s",
            path,
        )
    return store.where(path)


def peak_main(argv: list[str]) -> int:
    import argparse

    from raylab.probes.floor import installed_frameworks

    p = argparse.ArgumentParser(prog="raylab peak", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--frameworks", default=None, help="comma-separated: tf, torch, xla, jax (default: every installed one)"
    )
    p.add_argument("--precision", default="fp32,bf16", help="comma-separated: fp32, bf16, fp16 (default: %(default)s)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="what to measure (default: cpu)")
    p.add_argument(
        "--threads", default="1", help="intra-op threads, comma-separated, as trials' --threads (default: 1)"
    )
    p.add_argument("--size", type=int, default=None, help="matrix size n (default: 1024 on a CPU, 8192 on a GPU)")
    p.add_argument("--seconds", type=float, default=3.0, help="timed seconds per figure (default: 3)")
    args = p.parse_args(argv)
    names = [n.strip() for n in (args.frameworks or ",".join(installed_frameworks())).split(",") if n.strip()]
    for name in names:
        framework(name)  # an unknown name: a UserError before anything runs
    size = args.size or SIZES[args.device]
    figures = {}
    print(f"raylab peak: {size} x {size} products, {args.seconds:g} s per figure, one process each...", flush=True)
    for threads in (int(t) for t in args.threads.split(",")):
        for name in names:
            for precision in (q.strip() for q in args.precision.split(",")):
                found = probe(name, precision, args.device, threads, size, args.seconds)
                found["measured"] = time.strftime("%Y-%m-%d %H:%M:%S")
                figures[key(name, args.device, precision, threads)] = found
                shown = (
                    found["error"]
                    if "error" in found
                    else (f"{found['tflops'] * 1000:9,.1f} GFLOP/s (best {found['best_tflops'] * 1000:,.1f})")
                )
                print(f"  {key(name, args.device, precision, threads):<22} {shown}", flush=True)
    print(
        f"saved to {save({k: v for k, v in figures.items() if 'error' not in v})}; trials on this host at those "
        "settings now record peak_tflops and utilization"
    )
    return 0
