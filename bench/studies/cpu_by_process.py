"""Who used the CPU while a command ran: CPU-seconds per process role, read from /proc every second.

Runs the command, samples every process's user+system time once a second, and attributes the
difference to a role: the command itself (`driver`), Ray's daemons (gcs_server, raylet, dashboard,
log_monitor, ...), Ray workers by their process title (`ray::RayTrainWorker`, `ray::TrainController`,
`ray::IDLE` = a worker process still starting), raylab's plain scripts (`raylab.frameworks.plain`). On a
2-core machine this shows what a Ray Train trial pays besides its own training step.

    python bench/studies/cpu_by_process.py -- python recipes/fashion.py --trials tf:none --epochs 1 --threads 1
    python bench/studies/cpu_by_process.py --timeline -- python recipes/fashion.py --quick

Linux only (/proc). A process's CPU after its last sample (all of it, for one that lives less
than an interval) is missed, so the totals are a lower bound.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
DAEMONS = (
    "gcs_server",
    "raylet",
    "dashboard/agent",
    "dashboard/dashboard.py",
    "log_monitor",
    "runtime_env",
    "monitor.py",
    "raylab.frameworks.plain",
)


def role(pid: str, driver: int) -> tuple[float, str] | None:
    """(CPU seconds so far, role) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/comm") as f:
            comm = f.read().strip()
    except OSError:
        return None
    cpu = (int(fields[11]) + int(fields[12])) / HZ  # utime, stime (fields 14, 15 of proc(5), counted from 1)
    if int(pid) == driver:
        return cpu, "driver"
    if cmdline.startswith("ray::"):
        return cpu, cmdline.split()[0].split(".")[0][:40]  # ray::TrainController.run -> ray::TrainController
    name = next((d for d in DAEMONS if d in cmdline), None)
    return cpu, name or f"other: {comm}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--timeline", action="store_true", help="also print, each second, the roles that used CPU")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default: %(default)s)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command to run after --, e.g. -- python recipes/fashion.py --quick")
    if not os.path.isdir("/proc/self"):
        p.error("this needs Linux's /proc")

    proc = subprocess.Popen(command)
    me, seen, total = os.getpid(), {}, collections.Counter()
    start = time.monotonic()
    while proc.poll() is None:
        now, step = {}, collections.Counter()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            found = None if int(pid) == me else role(pid, proc.pid)
            if found is None:
                continue
            now[pid] = found
            if pid in seen:
                step[found[1]] += found[0] - seen[pid][0]
        seen = now
        total.update(step)
        if args.timeline:
            busy = ", ".join(f"{r} {v:.2f}" for r, v in step.most_common(4) if v >= 0.05)
            print(f"[cpu {time.monotonic() - start:6.1f}s] {busy}", file=sys.stderr, flush=True)
        time.sleep(args.interval)
    elapsed = time.monotonic() - start
    print(f"\nCPU by process role over {elapsed:.1f} s ({os.cpu_count()} cores; exit code {proc.returncode}):")
    for name, seconds in total.most_common():
        if seconds >= 0.05:
            print(f"  {name:42s} {seconds:7.1f} CPU-s  {100 * seconds / elapsed:5.1f}% of one core")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
