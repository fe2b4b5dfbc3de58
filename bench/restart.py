"""What a restart costs: a trial's worker SIGKILLed once its first epoch has reached the driver, then Ray Train
restarts the worker group from the last checkpoint.

Each round runs `recipes/fashion.py` (its own in-process Ray cluster, its own HOME and MLflow store) with one
trial, for 1 and for 2 workers, and kills the newest Ray Train worker process once "epoch 1 done" is printed.
The figures are the trial's own, from MLflow: `recovery_s` (the failure to the first step after it: new worker
processes, imports, data, model, the checkpoint restored), `lost_s` (training done again: from the last
checkpoint to the failure) and, for scale, `startup_s` (the first attempt's start to its first step).

    python bench/restart.py --trial torch:ddp --workers 1,2 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train_workers(home: Path) -> list[int]:
    """This run's Ray Train worker processes: their title says so and they carry the run's HOME."""
    mark, pids = f"HOME={home}".encode(), []
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"ray::RayTrainWorker")
                    and mark in (proc / "environ").read_bytes().split(b"\0")):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def fashion_args(trial: str, workers: int, epochs: int, steps: int, device: str, uri: str) -> list[str]:
    """The recipe's command line a round runs (its path first)."""
    return [str(ROOT / "recipes" / "fashion.py"), "--quick", "--trials", trial, "--workers", str(workers),
            "--epochs", str(epochs), "--steps-per-epoch", str(steps), "--checkpoint-every", "0", "--device", device,
            "--tracking-uri", uri, "--experiment", "restart"]


def one_round(trial: str, workers: int, epochs: int, steps: int, tmp: Path, device: str = "cpu") -> dict:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp}/mlflow.db"
    env = {**os.environ, "HOME": str(tmp), "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [sys.executable, *fashion_args(trial, workers, epochs, steps, device, uri)]
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    killed, lines = None, []
    try:
        for line in proc.stdout:
            lines.append(line)
            if killed is None and "] epoch 1 done" in line:
                killed = max(train_workers(tmp))
                os.kill(killed, signal.SIGKILL)
                print(f"  x{workers}: killed RayTrainWorker pid {killed} after epoch 1", flush=True)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode != 0 or killed is None:
        (tmp / "output.txt").write_text("".join(lines))
        raise RuntimeError(f"x{workers}: exit {proc.returncode}, killed={killed}; its output ends:\n"
                           + "".join(lines[-40:]))
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("restart").experiment_id
    (run,) = [r for r in client.search_runs([exp]) if r.data.tags.get("raylab.role") == "trial"]
    m = run.data.metrics
    if m.get("restarts") != 1:
        raise RuntimeError(f"x{workers}: restarts={m.get('restarts')}, expected 1")
    return {k: m[k] for k in ("recovery_s", "lost_s", "startup_s", "checkpoint_s", "checkpoints")}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trial", default="torch:ddp", help="trial kind (default torch:ddp)")
    p.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default 1,2)")
    p.add_argument("--rounds", type=int, default=2, help="rounds; each runs every worker count once (default 2)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=300, help="steps per epoch (default 300)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"), help="what each replica runs on (default cpu)")
    return p


def main() -> None:
    args = parser().parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    figures: dict[int, list[dict]] = {w: [] for w in counts}
    for r in range(args.rounds):
        for w in counts if r % 2 == 0 else counts[::-1]:  # alternate the order: drift hits both alike
            with tempfile.TemporaryDirectory(prefix="raylab-restart-") as tmp:
                t0 = time.monotonic()
                figures[w].append(one_round(args.trial, w, args.epochs, args.steps, Path(tmp), args.device))
                print(f"  round {r + 1} x{w}: {figures[w][-1]} ({time.monotonic() - t0:.0f} s)", flush=True)
    print(f"\n{args.trial}, worker SIGKILLed after epoch 1 of {args.epochs} ({args.steps} steps/epoch), "
          f"medians over {args.rounds} round(s):")
    print("workers  recovery s  lost s  startup s  checkpoint s")
    for w in counts:
        med = {k: statistics.median(f[k] for f in figures[w]) for k in figures[w][0]}
        print(f"{w:>7}  {med['recovery_s']:>10.1f}  {med['lost_s']:>6.1f}  {med['startup_s']:>9.1f}  "
              f"{med['checkpoint_s']:>12.2f}")


if __name__ == "__main__":
    main()
