"""Does a trial's `beside_cores` follow the other work on its node? A plain process burning a set share of a core
(0, 0.25, 0.5, 1: busy for that share of every 10 ms) beside a stand-in for a trial's worker (this process, burning
its own core), read as a worker reads its node (raylab/loop/beside.py) over each window, rounds interleaved.

    .venv/bin/python bench/beside.py                  # 3 rounds of 0, 0.25, 0.5, 1 core, 8 s windows
    .venv/bin/python bench/beside.py --rounds 5 --window-s 10 --shares 0,0.5,1

Prints each window's recorded cores of other work against the burner's share, and the largest gap over the
burner's share (the baseline, share 0, taken from each figure: the machine's own bookkeeping). Run it on a quiet
machine: anything else running is other work too, which is the point.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import time

from raylab.loop.beside import Beside
from raylab.record.figures import beside_figures

BURN = """
import sys, time
share = float(sys.argv[1])
period = 0.01
while True:
    start = time.perf_counter()
    while time.perf_counter() - start < share * period:
        pass
    time.sleep(max(0.0, (1 - share) * period))
"""


def burner(share: float) -> int | None:
    """A detached process (not this one's child) burning `share` of a core: its pid; None for share 0."""
    if share <= 0:
        return None
    out = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" "$2" >/dev/null 2>&1 & echo $!', sys.executable, BURN, str(share)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(out.stdout.strip())


def window(share: float, seconds: float) -> tuple[float, float]:
    """(cores of other work, cores of its own) over one window with a burner of `share` beside this process."""
    pid = burner(share)
    try:
        time.sleep(0.5)  # its interpreter started
        watch = Beside()
        watch.begin()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # the trial's stand-in: one core of its own
            pass
        read = watch.end()
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    metrics, tags = beside_figures([read], ["this node"])
    own = float(tags["beside"].split("the trial's own ")[1].split()[0])
    return metrics["beside_cores"], own


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window-s", type=float, default=8.0)
    p.add_argument("--shares", default="0,0.25,0.5,1", help="the burner's shares of a core, comma-separated")
    args = p.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    print(
        f"bench/beside.py: {platform.node()}, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    seen: dict[float, list[float]] = {s: [] for s in shares}
    for r in range(args.rounds):
        for share in shares if r % 2 == 0 else reversed(shares):
            other, own = window(share, args.window_s)
            seen[share].append(other)
            print(
                f"round {r + 1}: burner {share:.2f} core -> recorded {other:.3f} cores of other work "
                f"(its own {own:.2f})",
                flush=True,
            )
    base = sorted(seen.get(0.0, [0.0]))[len(seen.get(0.0, [0.0])) // 2]
    print(f"\nbaseline (no burner), median: {base:.3f} cores")
    worst = 0.0
    for share in shares:
        values = sorted(seen[share])
        median = values[len(values) // 2]
        gap = max(abs(v - base - share) for v in values)
        worst = max(worst, gap)
        print(
            f"burner {share:.2f}: median {median:.3f} (less the baseline {median - base:.3f}); the largest gap "
            f"from the burner's share {gap:.3f}"
        )
    print(f"the largest gap over every window: {worst:.3f} cores")


if __name__ == "__main__":
    main()
