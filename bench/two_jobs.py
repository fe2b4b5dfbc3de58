"""Two jobs on one `ray start` cluster: does each job's figure hold when another job is submitted beside it?

Each round runs job A alone, job B alone, then A and B at once (B started --gap-s after A), each a recipe's driver
connected with --address as a `ray job submit` entrypoint is, with a HOME and an MLflow store of its own. Printed:
every trial's samples/s alone and at once (medians over the rounds, and their ratio), whether any two trials of the
two jobs ran at the same time, and what the waiting job said.

    .venv/bin/python bench/two_jobs.py                       # 3 rounds, torch:none and tf:none, 3000 steps an epoch
    .venv/bin/python bench/two_jobs.py --rounds 1 --share-nodes   # as before the hold: side by side

Run it on a quiet machine; it starts (and at its end stops, with `ray stop --force`) a Ray head of its own.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_head(tmp: Path) -> tuple[dict, str]:
    env = {
        **os.environ,
        "HOME": str(tmp / "head"),
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
    }
    env.pop("RAY_AUTH_TOKEN", None)
    (tmp / "head").mkdir()
    subprocess.run([str(BIN / "ray"), "get-auth-token", "--generate"], env=env, check=True, capture_output=True)
    port = free_port()
    subprocess.run(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    token = (tmp / "head" / ".ray" / "auth_token").read_text().strip()
    return {**env, "RAY_AUTH_TOKEN": token}, f"127.0.0.1:{port}"


def launch(env: dict, address: str, where: Path, args) -> subprocess.Popen:
    (where / "home").mkdir(parents=True)
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        "--quick",
        "--trials",
        args.trials,
        "--compile",
        "off",
        "--steps-per-epoch",
        str(args.steps_per_epoch),
        "--address",
        address,
        "--tracking-uri",
        f"sqlite:///{where}/mlflow.db",
        "--experiment",
        "jobs",
        *(["--share-nodes"] if args.share_nodes else []),
    ]
    return subprocess.Popen(
        cmd,
        cwd=where,
        env={**env, "HOME": str(where / "home")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def trials(where: Path) -> dict[str, dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{where}/mlflow.db")
    exp = client.get_experiment_by_name("jobs")
    return {
        r.info.run_name: {
            "sps": r.data.metrics.get("samples_per_sec"),
            "beside": r.data.metrics.get("beside_cores"),
            "span": (float(r.data.tags["trial_started"]), float(r.data.tags["trial_ended"])),
        }
        for r in client.search_runs([exp.experiment_id])
        if r.data.tags.get("raylab.role") == "trial"
    }


def finish(proc: subprocess.Popen, name: str) -> str:
    out, _ = proc.communicate(timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"job {name} failed ({proc.returncode}):\n{out[-3000:]}")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--trials", default="torch:none,tf:none")
    p.add_argument("--steps-per-epoch", type=int, default=3000)
    p.add_argument("--gap-s", type=float, default=2.0, help="seconds between the two jobs' starts (default: 2)")
    p.add_argument("--share-nodes", action="store_true", help="the jobs' invocations hold no node (as before)")
    args = p.parse_args()
    print(
        f"bench/two_jobs.py: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {vars(args)}",
        flush=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="two-jobs-", dir="/tmp"))
    env, address = start_head(tmp)
    alone: dict[tuple, list] = {}
    together: dict[tuple, list] = {}
    overlaps, waits = 0, []
    try:
        for r in range(args.rounds):
            for job in "AB":
                where = tmp / f"r{r}-{job}-alone"
                finish(launch(env, address, where, args), job)
                for name, t in trials(where).items():
                    alone.setdefault((job, name), []).append(t["sps"])
            a_dir, b_dir = tmp / f"r{r}-A-at-once", tmp / f"r{r}-B-at-once"
            a = launch(env, address, a_dir, args)
            time.sleep(args.gap_s)
            b = launch(env, address, b_dir, args)
            outs = {"A": finish(a, "A"), "B": finish(b, "B")}
            waits += [line for o in outs.values() for line in o.splitlines() if line.startswith("raylab: waiting for")]
            got = {"A": trials(a_dir), "B": trials(b_dir)}
            for job, runs in got.items():
                for name, t in runs.items():
                    together.setdefault((job, name), []).append(t["sps"])
            overlaps += sum(
                1
                for x in got["A"].values()
                for y in got["B"].values()
                if x["span"][0] < y["span"][1] and y["span"][0] < x["span"][1]
            )
            print(
                f"round {r + 1}: "
                + "; ".join(
                    f"{job} {name} alone {alone[(job, name)][-1]:,.0f}, at once "
                    f"{together[(job, name)][-1]:,.0f} (beside "
                    f"{got[job][name]['beside'] or 0:.2f} cores)"
                    for job, name in sorted(together)
                ),
                flush=True,
            )
    finally:
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{'job':4s} {'trial':14s} {'alone':>10s} {'at once':>10s} {'ratio':>6s}   (medians of {args.rounds})")
    for key in sorted(together):
        x, y = statistics.median(alone[key]), statistics.median(together[key])
        print(f"{key[0]:4s} {key[1]:14s} {x:10,.0f} {y:10,.0f} {y / x:6.2f}x")
    print(f"trials of the two jobs that ran at the same time: {overlaps}")
    print(f"what a waiting job said ({len(waits)} lines), e.g.: {re.sub(r'^raylab: ', '', waits[0]) if waits else '-'}")


if __name__ == "__main__":
    main()
