"""One sustained matrix-product rate: `python -m raylab.frameworks.peak FRAMEWORK DTYPE DEVICE THREADS SIZE SECONDS`
(what `raylab peak` runs, raylab/probes/peak.py, in a process of its own with the framework's thread environment).

Products of two SIZE x SIZE matrices (2 x SIZE^3 FLOPs each, the framework's `flops.matmul`), after a warm-up,
in windows of about 0.25 s for SECONDS; prints one JSON line: the windows' median and best TFLOP/s.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from raylab.registry import framework

WINDOW_S = 0.25


def measure(name: str, dtype: str, device: str, threads: int, n: int, seconds: float) -> dict:
    run = framework(name).part("flops").matmul(n, dtype, device, threads)
    run(2)  # compiles, allocates
    k = 1
    while True:  # products per window: about WINDOW_S
        start = time.perf_counter()
        run(k)
        took = time.perf_counter() - start
        if took >= WINDOW_S or k >= 1 << 20:
            break
        k = max(k * 2, int(k * WINDOW_S / max(took, 1e-6)))
    rates, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(rates) < 3:
        start = time.perf_counter()
        run(k)
        rates.append(2 * n**3 * k / (time.perf_counter() - start) / 1e12)
    return {
        "tflops": statistics.median(rates),
        "best_tflops": max(rates),
        "windows": len(rates),
        "products_per_window": k,
        "size": n,
    }


if __name__ == "__main__":
    name, dtype, device, threads, n, seconds = sys.argv[1:7]
    print(json.dumps(measure(name, dtype, device, int(threads), int(n), float(seconds))))
