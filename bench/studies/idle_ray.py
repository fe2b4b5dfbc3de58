"""What an idle in-process Ray cluster costs the machine, and which of Ray's settings cut it.

A 1-worker trial on a 2-core machine shares it with its cluster: the raylet, the GCS, the dashboard and its agent,
the log monitor and a dozen idle actors (Ray Train's controller, synchronization and autoscaling actors, Ray
Data's dataset manager, raylab's sink and group queue), each waking on Ray's timers. bench/studies/thread_profile.py
measured them at 0.19-0.28 cores beside a trial; a framework that keeps 1.5 cores busy (JAX's CPU client) loses
that share.

For each setting (`--configs`), one after the other in their own processes: an in-process cluster started as
raylab starts one (raylab/runtime/cluster.py, workers at niceness 0), `--actors` idle actors (as many as a trial
has beside its worker), `--settle` seconds to let start-up pass, then every process's CPU over `--seconds` (/proc),
summed by kind (the driver, the raylet, the GCS, the dashboard, its agent, the log monitor, the actors).

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/idle_ray.py

Results in bench/results.md ("What an idle cluster costs").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# name -> (ray.init keyword arguments, _system_config, environment); every one keeps worker_niceness 0 as raylab's
CONFIGS = {
    "default": ({}, {}, {}),
    "no-dashboard": ({"include_dashboard": False}, {}, {}),
    "events-10s": ({}, {"task_events_report_interval_ms": 10000}, {}),
    "no-metrics": ({}, {}, {"RAY_enable_metrics_collection": "0"}),
    "slow-reports": (
        {},
        {
            "raylet_report_resources_period_milliseconds": 1000,
            "health_check_period_ms": 10000,
            "core_worker_internal_heartbeat_ms": 10000,
            "memory_monitor_refresh_ms": 1000,
        },
        {},
    ),
}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kind(pid: int, me: int) -> str | None:
    if pid == me:
        return "driver"
    try:
        words = (Path(f"/proc/{pid}") / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    line = b" ".join(words).decode(errors="replace")
    for key, name in (
        ("gcs_server", "gcs"),
        ("/raylet", "raylet"),
        ("dashboard.py", "dashboard"),
        ("DashboardAgent", "dashboard agent"),
        ("agent_manager", "dashboard agent"),
        ("runtime_env/agent", "runtime env agent"),
        ("log_monitor", "log monitor"),
        ("ray::Idle", "idle actors"),
        ("ray::IDLE", "idle workers"),
    ):
        if key in line:
            return name
    return "other ray" if "ray" in line else None


def idle_actors(ray, n: int, timeout: float = 120) -> list:
    """n idle actors on the connected cluster, each answering once (so each has its process); keep the list to keep
    them alive. bench/studies/ladder.py's beside rung holds its cluster's with it too."""

    @ray.remote(num_cpus=0)
    class Idle:
        def ready(self) -> bool:
            return True

    held = [Idle.remote() for _ in range(n)]
    ray.get([a.ready.remote() for a in held], timeout=timeout)
    return held


def one(name: str, actors: int, settle: float, seconds: float) -> dict:
    """In this process: the cluster under setting `name`, measured."""
    kwargs, system, env = CONFIGS[name]
    os.environ.update(env)
    import ray

    ray.init(
        address="local",
        log_to_driver=False,
        logging_level="ERROR",
        _system_config={"worker_niceness": 0, **system},
        **kwargs,
    )

    held = idle_actors(ray, actors)  # noqa: F841 - held: they stay alive while the cluster is measured
    time.sleep(settle)  # start-up's CPU behind us (a wait for nothing else: the window is what is measured)
    me = os.getpid()
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    kinds = {p: k for p in pids if (k := kind(p, me))}
    before, t0 = {p: cpu_s(p) for p in kinds if Path(f"/proc/{p}").exists()}, time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - t0
    used: dict[str, float] = {}
    for p, start in before.items():
        try:
            used[kinds[p]] = used.get(kinds[p], 0.0) + (cpu_s(p) - start) / took
        except OSError:
            continue
    ray.shutdown()
    return used


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated from %(default)s")
    p.add_argument("--actors", type=int, default=8)
    p.add_argument("--settle", type=float, default=8.0)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.actors, args.settle, args.seconds)))
        return
    names = [c.strip() for c in args.configs.split(",")]
    print(
        f"{args.actors} idle actors, {args.settle:g} s to settle, {args.seconds:g} s measured, {args.rounds} "
        f"round(s); cores used by each kind of process:",
        flush=True,
    )
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else reversed(names):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    name,
                    "--actors",
                    str(args.actors),
                    "--settle",
                    str(args.settle),
                    "--seconds",
                    str(args.seconds),
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                raise SystemExit(f"{name}: exited with {done.returncode}:\n{done.stderr[-3000:]}")
            used = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"round {r + 1} {name:<13} {sum(used.values()):.3f} cores in all: "
                + ", ".join(f"{k} {v:.3f}" for k, v in sorted(used.items(), key=lambda kv: -kv[1])),
                flush=True,
            )
            # nothing left for the next
            subprocess.run(
                [str(Path(sys.executable).with_name("ray")), "stop", "--force"], capture_output=True, timeout=60
            )


if __name__ == "__main__":
    main()
