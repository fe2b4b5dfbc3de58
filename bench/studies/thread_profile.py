"""Where a 1-worker trial's process spends its time against the plain loop's: py-spy over the same steady window.

For each side, one after the other, the training runs as bench/loop_cost.py runs it (the same recipe, batch, epochs
and thread count): the plain loop in its own process (`loop_cost.py --plain`), then the raylab trial
(`recipes/RECIPE.py --trials torch:none --workers 1`, its Ray Train worker process the one sampled); with `--rungs`,
also bench/studies/ladder.py's rungs between the two: the same plain loop as a bare Ray task (its Ray worker
sampled) and in a bare Ray Train worker without raylab. Once the steps are steady (the plain process, or the rung's
worker, has spent `--warm-cpu` seconds of CPU, its imports, data and first steps behind it; the trial has printed its
first epoch's end), py-spy samples it twice for `--seconds` each, without pausing it (`--nonblocking`):

- every thread that is running (not idle): a thread's share of the samples is the share of the window it was on a
  CPU or wanting one;
- only the thread holding the GIL (`--gil`): who holds the interpreter while the training thread would need it;
- and, over both, every other process's CPU (/proc) and the machine's busy and stolen time (/proc/stat).

Printed per side and thread: its name (the first frame of its own, below `threading`'s), its share of the window
running and holding the GIL, and the frames it spent the most samples in (leaf frames, `--native` adds C/C++). The
training thread is the one that holds the GIL most. What runs beside it in the trial's process and not in the plain
one is what the trial adds to its step.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/thread_profile.py     # torch, the fashion MLP
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/thread_profile.py --framework jax \
        --recipe residual_mlp --batch 64 --epochs 30
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/thread_profile.py --rungs trial,plain,task,train
        # (the ladder's rungs)

py-spy (`pip install py-spy`) must be on PATH or in the venv's bin; it reads other processes' memory (root, or
ptrace allowed). Results in bench/results.md ("Where the trial's process spends its time").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
TRIAL = {"torch": "torch:none", "tf": "tf:none", "jax": "jax:none"}
PLUMBING = ("threading.py", "concurrent/futures/thread.py", "<frozen ")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy (into this venv), then run this again")
    return found


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine() -> tuple[dict[int, tuple[str, float]], list[int]]:
    """({pid: (its name, CPU seconds)} of every process, /proc/stat's cpu line in ticks): to diff over a window."""
    procs = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                words = (p / "cmdline").read_bytes().split(b"\0")[:3]
                title = " ".join(w.decode(errors="replace").rsplit("/", 1)[-1] for w in words)[:70]
                procs[int(p.name)] = (title, cpu_s(int(p.name)))
            except (OSError, IndexError):
                continue
    return procs, [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def beside(before, after, seconds: float, pid: int) -> dict:
    """Cores each other process used over the window, and the machine's: busy, idle and stolen by the hypervisor."""
    used = [(after[0][p][1] - t, name, p) for p, (name, t) in before[0].items() if p in after[0] and p != pid]
    ticks = [b - a for a, b in zip(before[1], after[1])]
    total = sum(ticks) or 1
    cores = os.cpu_count() or 1
    share = {
        "busy": (total - ticks[3] - ticks[4]) / total * cores,
        "steal": (ticks[7] if len(ticks) > 7 else 0) / total * cores,
    }
    return {"others": sorted(((u / seconds, n, p) for u, n, p in used if u > 0), reverse=True), **share}


def pin(pid: int, cpus: set[int] | None = None) -> None:
    """Every thread of `pid` to CPU 0, every other process's threads to the other CPUs (a probe: where the machine's
    other work lands); `pin(0, every CPU)` undoes it for every thread. Processes started meanwhile inherit their
    parent's CPUs, so `main` undoes it however the run ends."""
    rest = set(range(1, os.cpu_count() or 2)) or {0}
    for p in Path("/proc").iterdir():
        for task in (p / "task").glob("*") if p.name.isdigit() else ():
            try:
                os.sched_setaffinity(int(task.name), cpus or ({0} if int(p.name) == pid else rest))
            except OSError:
                continue


def newest(marker: bytes = b"RayTrainWorker") -> int | None:
    """The newest process whose command line holds `marker`: the Ray Train worker (`RayTrainWorker`), or the Ray
    worker running the ladder's task rung (`ray::plain_loop`); run nothing else beside this."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in (p / "cmdline").read_bytes():
                    found.append((p.stat().st_mtime, int(p.name)))
            except OSError:
                continue
    return max(found)[1] if found else None


def sample(pid: int, seconds: float, rate: int, gil: bool, native: bool, out: Path) -> dict[str, collections.Counter]:
    """{thread id: Counter of stacks (root first) sampled}."""
    cmd = (
        [
            py_spy(),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(seconds),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--threads",
            "--nonblocking",
            "--output",
            str(out),
        ]
        + (["--gil"] if gil else [])
        + (["--native"] if native else [])
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise SystemExit(f"py-spy exited with {done.returncode}: {done.stderr[-2000:]}")
    threads: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, _, frames = stack.partition(";")
        threads[thread][frames] += int(count)
    return threads


def name_of(stacks: collections.Counter) -> str:
    """A thread's own first frame: the commonest first frame below threading's and importlib's."""
    firsts = collections.Counter()
    for frames, n in stacks.items():
        own = [f for f in frames.split(";") if not any(p in f for p in PLUMBING)]
        firsts[own[0] if own else frames.split(";")[0]] += n
    return firsts.most_common(1)[0][0] if firsts else "?"


def leaves(stacks: collections.Counter, top: int) -> list[tuple[str, int]]:
    out = collections.Counter()
    for frames, n in stacks.items():
        out[frames.split(";")[-1]] += n
    return out.most_common(top)


SAMPLED = {"task": b"ray::plain_loop", "train": b"RayTrainWorker", "trial": b"RayTrainWorker"}  # rung -> its process


def profile(side: str, cmd: list[str], env: dict, args, tmp: Path) -> dict:
    """Start `cmd`; once its steps are steady (the plain process, or the ladder's task or train rung's process:
    `--warm-cpu` CPU seconds spent; the trial: its first epoch done, as its progress line says), sample it both ways;
    let the run finish."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp, env=env)
    lines, steady = [], threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"\] epoch 1 done in", line):
                steady.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline, pid, pinned = time.monotonic() + 300, None, False
    while time.monotonic() < deadline and proc.poll() is None:
        if args.pin and not pinned:
            target = proc.pid if side == "plain" else newest(SAMPLED[side])
            if target:
                pin(target)  # the whole run pinned: its samples/s is the pinned run's
                pinned = True
        try:
            if side == "plain" and cpu_s(proc.pid) >= args.warm_cpu:
                pid = proc.pid
            elif side == "trial" and steady.wait(0.2):
                pid = newest()
            elif side in ("task", "train") and (found := newest(SAMPLED[side])) and cpu_s(found) >= args.warm_cpu:
                pid = found
        except OSError:
            pass
        if pid:
            break
        time.sleep(0.2)
    if not pid:
        raise SystemExit(f"{side}: exited or never steady ({proc.returncode}):\n{''.join(lines)[-3000:]}")
    start_cpu, start, first = cpu_s(pid), time.monotonic(), machine()
    running = sample(pid, args.seconds, args.rate, False, args.native, tmp / f"{side}-running.txt")
    holding = sample(pid, args.seconds, args.rate, True, args.native, tmp / f"{side}-gil.txt")
    took = time.monotonic() - start
    used, around = (cpu_s(pid) - start_cpu) / took, beside(first, machine(), took, pid)
    proc.wait(timeout=900)
    reader.join(60)
    if proc.returncode != 0:
        raise SystemExit(f"{side}: exited with {proc.returncode}:\n{''.join(lines)[-3000:]}")
    return {
        "pid": pid,
        "running": running,
        "holding": holding,
        "cores_used": used,
        "beside": around,
        "output": "".join(lines),
    }


def report(side: str, got: dict, args) -> None:
    samples = args.seconds * args.rate
    threads = set(got["running"]) | set(got["holding"])
    rows = sorted(threads, key=lambda t: -sum(got["holding"][t].values()))
    print(
        f"\n{side} (pid {got['pid']}, {len(threads)} thread(s) seen, the process used {got['cores_used']:.2f} cores):"
    )
    for t in rows:
        run, hold = got["running"][t], got["holding"][t]
        print(
            f"  {t}: running {sum(run.values()) / samples:6.1%}, holding the GIL {sum(hold.values()) / samples:6.1%}  "
            f"{name_of(run or hold)}"
        )
        for leaf, n in leaves(run or hold, args.top):
            print(f"      {n / samples:6.1%}  {leaf}")
    around = got["beside"]
    print(
        f"  the machine over the window: {around['busy']:.2f} cores busy, {around['steal']:.2f} stolen by the "
        f"hypervisor; the other processes {sum(c for c, _, _ in around['others']):.2f} cores in all, the most (cores):"
    )
    for cores, name, pid in around["others"][: 2 * args.top]:
        print(f"      {cores:.3f}  {name} (pid {pid})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", default="torch", choices=sorted(TRIAL))
    p.add_argument("--recipe", default="fashion", help="fashion or residual_mlp (default: %(default)s)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=8, help="enough that both samples fall in steady steps")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=int, default=6, help="each sample's length (default: %(default)s)")
    p.add_argument("--rate", type=int, default=250, help="samples a second (default: %(default)s)")
    p.add_argument("--warm-cpu", type=float, default=8.0, help="CPU seconds the sampled process spends first")
    p.add_argument(
        "--pin",
        action="store_true",
        help="a probe: the sampled process alone on CPU 0 from its start "
        "(the trial's worker: from when it appears), every other process on the other CPUs",
    )
    p.add_argument(
        "--rungs",
        default="trial,plain",
        help="what is sampled, comma-separated, in this order (the trial first where it is named: the "
        "others run the execution it chose): trial (the raylab trial's Ray Train worker), plain (the "
        "plain loop's own process), and bench/studies/ladder.py's rungs between them, task (the plain "
        "loop as a bare Ray task) and train (in a bare Ray Train worker, no raylab) (default: "
        "%(default)s)",
    )
    p.add_argument("--native", action="store_true", help="C/C++ frames too (slower sampling)")
    p.add_argument("--top", type=int, default=6, help="frames shown per thread (default: %(default)s)")
    args = p.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes"), str(BENCH)]
    import importlib

    import cloudpickle

    from raylab.data import as_dataset
    from raylab import registry

    recipe = importlib.import_module(args.recipe).RECIPE.with_batch(args.batch)
    ds = as_dataset(recipe.data, recipe.name)
    with tempfile.TemporaryDirectory(prefix="raylab-profile-") as tmp:
        tmp = Path(tmp)
        (tmp / "task.pkl").write_bytes(
            cloudpickle.dumps((recipe.task(ds.target_names), (ds.x_train, ds.y_train, ds.x_test, ds.y_test)))
        )
        uri = f"sqlite:///{tmp}/mlflow.db"
        rungs = [r.strip() for r in args.rungs.split(",") if r.strip()]
        if bad := [r for r in rungs if r not in ("plain", *SAMPLED)]:
            raise SystemExit(f"--rungs: unknown {bad}; choose from trial, plain, task, train")
        got, sps, execution = {}, {}, None
        for rung in sorted(rungs, key=lambda r: r != "trial"):  # the trial first: the others run its execution
            if rung == "trial":
                cmd = [
                    sys.executable,
                    str(ROOT / "recipes" / f"{args.recipe}.py"),
                    "--trials",
                    TRIAL[args.framework],
                    "--workers",
                    "1",
                    "--epochs",
                    str(args.epochs),
                    "--batch",
                    str(args.batch),
                    "--threads",
                    str(args.threads),
                    "--experiment",
                    "bench-profile",
                    "--tracking-uri",
                    uri,
                    "--json",
                    str(tmp / "t.json"),
                ]
                env = {**os.environ, "PYTHONPATH": str(ROOT)}
            else:
                spec = {
                    "framework": args.framework,
                    "task": str(tmp / "task.pkl"),
                    "threads": args.threads,
                    "epochs": args.epochs,
                    "steps_per_epoch": None,
                    "batch": args.batch,
                    "seed": 0,
                    "warmup": recipe.warmup_steps,
                    "window": 32,
                    "execution": execution,
                    "tmp": str(tmp),
                }
                (tmp / "spec.json").write_text(json.dumps(spec))
                if rung == "plain":
                    cmd, env = (
                        [sys.executable, str(BENCH / "loop_cost.py"), "--plain", str(tmp / "spec.json")],
                        registry.framework(args.framework).plain_env(args.threads),
                    )
                else:  # as ladder.py runs its rungs
                    cmd = [sys.executable, str(BENCH / "studies" / "ladder.py"), "--rung", rung, str(tmp / "spec.json")]
                    env = {
                        **os.environ,
                        "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), str(ROOT / "recipes")]),
                        "OMP_NUM_THREADS": str(args.threads),
                    }
            try:
                got[rung] = profile(rung, cmd, env, args, tmp)
            finally:
                if args.pin:
                    pin(0, set(range(os.cpu_count() or 1)))
            if rung == "trial":
                trial = json.loads((tmp / "t.json").read_text())["trials"][0]
                sps[rung], execution = trial["samples_per_sec"], trial.get("execution")
            else:
                sps[rung] = json.loads(got[rung]["output"].strip().splitlines()[-1])["samples_per_sec"]
        base = sps.get("plain")
        print(
            f"{args.recipe}, batch {args.batch}, {args.threads} thread(s), {args.epochs} epochs, {args.framework} "
            f"({execution or 'eager'}); each side sampled twice for {args.seconds} s at {args.rate}/s once steady; "
            "steady samples/s, py-spy attached: "
            + ", ".join(
                f"{r} {v:,.0f}" + (f" ({v / base:.3f}x plain)" if base and r != "plain" else "") for r, v in sps.items()
            )
            + ("; each pinned to CPU 0, the rest of the machine to the others" if args.pin else "")
        )
        names = {
            "plain": "plain loop",
            "task": "the plain loop as a bare Ray task",
            "train": "the plain loop in a bare Ray Train worker",
            "trial": f"trial's worker ({TRIAL[args.framework]})",
        }
        for rung in sorted(got, key=lambda r: ("plain", "task", "train", "trial").index(r)):
            report(names[rung], got[rung], args)


if __name__ == "__main__":
    main()
