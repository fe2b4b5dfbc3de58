"""A probe: the cluster's other processes at a lower priority than the training process, while something runs.

Runs until stopped. Every 0.2 s it sets every thread of every Ray process (`ray::` actors and workers, the raylet,
the GCS, the dashboard and its agents, the log monitor) and of a recipe's driver to `--nice` (10 by default), and
the Ray Train worker's threads (`RayTrainWorker`) to 0; bench/loop_cost.py and its plain loops are left as they are.
A question for CFS: if the cluster's wakeups no longer preempt the step, does the trial gain what it loses to them?
Setting a nice value back to 0 needs root (CAP_SYS_NICE): a Ray worker reniced while idle and then made a trial's
worker is put back only as root. For a bench, not for raylab:

    python3 bench/studies/renice_others.py & flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py \\
        --recipe residual_mlp --batch 64 --frameworks jax,torch --rounds 3 --min-steady-s 6; kill %1

Results in bench/results.md ("Every framework on both models").
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

OURS = (b"ray::", b"raylet", b"gcs_server", b"dashboard", b"log_monitor", b"recipes/", b"ray/_private", b"runtime_env")
LEFT = (b"--plain", b"loop_cost.py", b"renice_others")


def once(nice: int, me: int) -> None:
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == me:
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if any(k in cmd for k in LEFT) or not any(k in cmd for k in OURS):
            continue
        want = 0 if b"RayTrainWorker" in cmd else nice
        for t in (p / "task").glob("*"):
            try:
                if os.getpriority(os.PRIO_PROCESS, int(t.name)) != want:
                    os.setpriority(os.PRIO_PROCESS, int(t.name), want)
            except OSError:
                continue


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nice", type=int, default=10)
    args = p.parse_args()
    while True:
        once(args.nice, os.getpid())
        time.sleep(0.2)


if __name__ == "__main__":
    main()
