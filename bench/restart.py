"""What a restart costs: a trial's worker SIGKILLed mid-epoch 2, then Ray Train restarts the worker group from the
last checkpoint (epoch 1's end).

Each round runs `tests/held_recipe.py` (the fashion MLP in torch; its own in-process Ray cluster, its own HOME and
MLflow store) with one trial, for 1 and for 2 workers. The recipe's model holds its trial at step 1.5 x
steps-per-epoch and writes the worker's pid; this tool kills that process there, so the kill lands mid-trial on
the trial's own worker however fast the machine runs the steps, and lets every later hold (the restarted
workers', mid-epoch 3) go on. The figures are the trial's own, from MLflow: `recovery_s` (the failure to the first
step after it: new worker processes, imports, data, model, the checkpoint restored), `lost_s` (training done again:
from the last checkpoint to the failure, half an epoch here) and, for scale, `startup_s` (the first attempt's start
to its first step).

    python bench/restart.py --trial torch:ddp --workers 1,2 --rounds 2

With RESTART_OUT=DIR, each round's recipe output is kept as DIR/xN.txt.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 600  # the longest a round waits for its trial to reach the hold


def fashion_args(trial: str, workers: int, epochs: int, steps: int, device: str, uri: str) -> list[str]:
    """The held recipe's command line a round runs (its path first)."""
    return [
        str(ROOT / "tests" / "held_recipe.py"),
        "--quick",
        "--trials",
        trial,
        "--workers",
        str(workers),
        "--epochs",
        str(epochs),
        "--steps-per-epoch",
        str(steps),
        "--checkpoint-every",
        "0",
        "--device",
        device,
        "--tracking-uri",
        uri,
        "--experiment",
        "restart",
    ]


def kill_at_hold(gate: Path, done: threading.Event) -> int | None:
    """Kills the worker that holds first (the pid in its held file) and releases every later hold; the pid killed."""
    sys.path.insert(0, str(ROOT))
    from tests.held_recipe import Gate

    killed, holds = None, Gate(gate)
    deadline = time.monotonic() + WAIT_S
    while not done.is_set() and time.monotonic() < deadline:
        for held, pid, *_ in holds.holds():
            if killed is None:
                killed = pid
                os.kill(killed, signal.SIGKILL)
                print(f"  killed RayTrainWorker pid {killed}, held mid-epoch 2", flush=True)
            holds.release(held)
        time.sleep(0.05)
    return killed


def one_round(trial: str, workers: int, epochs: int, steps: int, tmp: Path, device: str = "cpu") -> dict:
    from mlflow.tracking import MlflowClient

    uri, gate = f"sqlite:///{tmp}/mlflow.db", tmp / "gate"
    gate.mkdir()
    env = {**os.environ, "HOME": str(tmp), "RAY_USAGE_STATS_ENABLED": "0", "RAYLAB_TEST_GATE": str(gate)}
    cmd = [sys.executable, *fashion_args(trial, workers, epochs, steps, device, uri)]
    proc = subprocess.Popen(
        cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    done, killed = threading.Event(), []
    killer = threading.Thread(target=lambda: killed.append(kill_at_hold(gate, done)), daemon=True)
    killer.start()
    try:
        lines = list(proc.stdout)
        proc.wait(timeout=900)
    finally:
        done.set()
        killer.join(timeout=5)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    if os.environ.get("RESTART_OUT"):  # where to keep each round's output
        Path(os.environ["RESTART_OUT"], f"x{workers}.txt").write_text("".join(lines))
    if proc.returncode != 0 or not killed or killed[0] is None:
        raise RuntimeError(
            f"x{workers}: exit {proc.returncode}, killed={killed}; its output ends:\n" + "".join(lines[-40:])
        )
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("restart").experiment_id
    (run,) = [r for r in client.search_runs([exp]) if r.data.tags.get("raylab.role") == "trial"]
    m = run.data.metrics
    if m.get("restarts") != 1:
        raise RuntimeError(
            f"x{workers}: restarts={m.get('restarts')}, expected 1 (the kill landed on pid "
            f"{killed[0]}, the trial's worker held mid-epoch 2)"
        )
    return {k: m[k] for k in ("recovery_s", "lost_s", "startup_s", "checkpoint_s", "checkpoints")}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--trial",
        default="torch:ddp",
        choices=("torch:none", "torch:ddp"),
        help="trial kind: the held recipe's model is torch's (default torch:ddp)",
    )
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
    print(
        f"\n{args.trial}, worker SIGKILLed mid-epoch 2 of {args.epochs} ({args.steps} steps/epoch), "
        f"medians over {args.rounds} round(s):"
    )
    print("workers  recovery s  lost s  startup s  checkpoint s")
    for w in counts:
        med = {k: statistics.median(f[k] for f in figures[w]) for k in figures[w][0]}
        print(
            f"{w:>7}  {med['recovery_s']:>10.1f}  {med['lost_s']:>6.1f}  {med['startup_s']:>9.1f}  "
            f"{med['checkpoint_s']:>12.2f}"
        )


if __name__ == "__main__":
    main()
