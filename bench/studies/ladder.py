"""Where a 1-worker trial's cost appears: the same plain loop climbed rung by rung from a plain process to a trial.

For each framework and round, each rung runs as its own process, one after the other, the rungs' order rotated
from round to round (so the machine's drift falls on every rung alike):

- plain: the plain loop in a plain Python process (its main thread), no Ray;
- beside: the same plain process with an idle in-process cluster running beside it, started in another process as
  raylab starts one (workers at niceness 0) with --idle-actors idle actors (a trial's worker has Ray Train's
  controller, synchronization and autoscaling actors, Ray Data's dataset manager and raylab's sink and group queue
  beside it): what the cluster's own processes cost a loop that runs outside Ray; `beside+sched_idle` with the
  whole cluster under SCHED_IDLE (`chrt --idle 0`, which its processes inherit), `beside+no_dashboard` without
  Ray's dashboard (what might cut that cost);
- task: the same function as a bare Ray task (`@ray.remote(num_cpus=threads)`) on an in-process cluster
  started as raylab starts one (raylab/runtime/cluster.py: workers at niceness 0), data read from the same file;
- train: the same function as a bare Ray Train training function (DataParallelTrainer, a bare BackendConfig,
  1 worker reserving `threads` CPUs, Ray's default settings): it runs on a thread of the worker actor while
  Ray Train's controller polls that actor;
- trial: the raylab trial, `recipes/RECIPE.py --trials torch:none|tf:none|jax:none --workers 1` (its own
  loop, data through the object store, progress, MLflow).

The plain loop is what a careful user writes (bench/loop_cost.py): for torch the usual loop keeping the running
loss and accuracy on the device and reading them every 32 steps; for TF Keras `fit(steps_per_execution=32)`;
for JAX one jitted step, sums read every 32 steps. Every side is timed over the same windows (raylab.loop.windows,
raylab.timing.Chrono: the warm-up left out, evaluation outside every window) and gives its steady-state samples/s.

Each round's figure for a rung is its samples/s over the plain rung's in the same round. Printed per rung: the
median ratio, its spread (the quartiles and the range), and a two-sided exact sign-flip permutation test of the
mean log ratio (p < 0.05: the rung's cost is real, not the machine's drift); and the same for each rung against
the rung below it, which says where a cost appears. Also the CPU the rest of the machine used while each side
trained (cores, from /proc/stat, the trained process's own share taken out where it is known): Ray's processes
share the 2 cores with the step.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/ladder.py --frameworks torch,tf --rounds 9
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/ladder.py --frameworks torch --rounds 9 \
        --rungs plain,task,train
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/ladder.py --frameworks jax --rounds 9 \
        --rungs plain,beside,trial --recipe residual_mlp --batch 64
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/studies/ladder.py --frameworks jax --rounds 5 --epochs 14 \
        --rungs plain,beside,beside+sched_idle,beside+no_dashboard

Results in bench/results.md ("The ladder"; the beside rung: "JAX's MLP gap is its cluster beside it").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"  # loop_cost.py, whose plain loop every rung runs
TRIAL = {"torch": "torch:none", "tf": "tf:none", "jax": "jax:none"}
RUNGS = ("plain", "beside", "task", "train", "trial")
BESIDE = ("beside", "beside+sched_idle", "beside+no_dashboard")
SETTLE_S = 5.0  # the beside rung: seconds between its cluster's actors answering and the plain process's start


# --- the loop, wherever it runs -----------------------------------------------------------------------------------


def plain_loop(spec: dict) -> dict:
    """The plain loop of spec["framework"] on the task and data in spec["task"], in the calling thread."""
    sys.path[:0] = [p for p in (str(ROOT), str(BENCH)) if p not in sys.path]
    import cloudpickle

    from loop_cost import plain_torch, process_facts

    start = spec.get("start") or time.time()
    with open(spec["task"], "rb") as f:
        task, (x, y, xt, yt) = cloudpickle.load(f)
    spec = {**spec, "start": start, "trace": True}
    if spec["framework"] == "torch":
        result = plain_torch(spec, task, x, y, xt, yt)
    else:
        from raylab.registry import framework

        result = framework(spec["framework"]).part("plain").run(spec, task, x, y, xt, yt)
    cpu = os.times()
    return {
        **result,
        **process_facts(),
        "threads_in_process": len(os.listdir("/proc/self/task")),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "process_cpu_s": cpu.user + cpu.system,
        "thread": threading.current_thread().name,
        "pid": os.getpid(),
    }


def train_fn(config: dict) -> None:
    """The bare Ray Train training function: the plain loop, its result written where the driver reads it."""
    result = plain_loop(config["spec"])
    Path(config["out"]).write_text(json.dumps(result))


def idle_cluster(actors: int, rung: str) -> None:
    """The beside rung's cluster (`ladder.py --cluster N RUNG`): an in-process cluster as raylab starts one with N
    idle actors (beside+no_dashboard: without the dashboard); prints "up" once they answer, then holds it until its
    standard input closes."""
    import ray

    ray.init(
        address="local",
        log_to_driver=False,
        logging_level="WARNING",
        _system_config={"worker_niceness": 0},
        **({"include_dashboard": False} if rung == "beside+no_dashboard" else {}),
    )
    from idle_ray import idle_actors  # bench/studies/, this script's own folder

    held = idle_actors(ray, actors, timeout=300)  # noqa: F841 - held: alive until the cluster ends
    print("up", flush=True)
    sys.stdin.read()
    ray.shutdown()


def run_rung(rung: str, spec_path: str) -> None:
    """One rung's process (`ladder.py --rung RUNG SPEC`): prints the plain loop's result as one JSON line."""
    spec = json.loads(Path(spec_path).read_text())
    spec["start"] = time.time()
    if rung == "plain" or rung in BESIDE:  # beside: ladder's driver holds an idle cluster beside this process
        print(json.dumps(plain_loop(spec)))
        return
    import ray

    from raylab import registry

    env = {
        k: v
        for k, v in registry.framework(spec["framework"]).plain_env(spec["threads"]).items()
        if os.environ.get(k) != v
    }
    # as raylab's own in-process cluster (raylab/runtime/cluster.py), workers at normal priority
    ray.init(address="local", log_to_driver=False, logging_level="WARNING", _system_config={"worker_niceness": 0})
    if rung == "task":
        remote = ray.remote(num_cpus=spec["threads"], runtime_env={"env_vars": env})(plain_loop)
        print(json.dumps(ray.get(remote.remote(spec))))
        return
    from ray.train import RunConfig, ScalingConfig
    from ray.train.backend import BackendConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    out = Path(spec["tmp"]) / f"train-{os.getpid()}.json"
    DataParallelTrainer(
        train_fn,
        train_loop_config={"spec": spec, "out": str(out)},
        backend_config=BackendConfig(),
        scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": spec["threads"]}),
        run_config=RunConfig(
            name=f"ladder-{os.getpid()}",
            storage_path=str(Path(spec["tmp"]) / "train"),
            worker_runtime_env={"env_vars": env},
        ),
    ).fit()
    print(out.read_text())


# --- the driver ---------------------------------------------------------------------------------------------------


class Busy:
    """The machine's busy CPU (cores) over time, sampled from /proc/stat every 0.25 s on a thread of this (otherwise
    waiting) process."""

    def __init__(self):
        self.samples: list[tuple[float, float]] = []  # (wall clock, busy CPU seconds so far)
        self.stop = threading.Event()
        self.hz = os.sysconf("SC_CLK_TCK")
        threading.Thread(target=self._run, daemon=True).start()

    def _read(self) -> float:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return (sum(fields[:8]) - idle) / self.hz

    def _run(self):
        while not self.stop.wait(0.25):
            self.samples.append((time.time(), self._read()))

    def cores(self, begin: float, end: float) -> float | None:
        """Mean busy cores between two wall-clock times (the nearest samples inside them)."""
        inside = [s for s in self.samples if begin <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 0.5:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def steady_span(result: dict, warmup_windows: int = 1) -> tuple[float, float] | None:
    """(begin, end) wall clock of the steady windows a side's trace holds."""
    trace = result.get("trace") or []
    if len(trace) <= warmup_windows + 1:
        return None
    steady = trace[warmup_windows + 1 :]
    return steady[0][0] - steady[0][1], steady[-1][0]


def side(rung: str, framework: str, args, tmp: Path, busy: Busy) -> dict:
    sys.path[:0] = [str(BENCH)]
    from loop_cost import run_trial

    began = time.time()
    if rung.startswith("trial"):  # trial+NAME=VALUE: the trial with that setting in its environment
        extra = dict(kv.split("=", 1) for kv in rung.split("+")[1:])
        asked = argparse.Namespace(recipe=args.recipe, batch=args.batch, threads=args.threads, steps_per_epoch=0)
        got = run_trial(framework, asked, tmp, args.epochs, extra_env=extra)
        span = None  # (its steady seconds are not known here)
    else:
        from raylab import registry

        # the plain rung in its framework's plain environment, as bench/loop_cost.py's plain side and the Ray rungs'
        # workers (JAX's and TF's thread settings are read at import: OMP_NUM_THREADS alone left XLA's pool default)
        env = {
            **registry.framework(framework).plain_env(args.threads),
            # recipes/ too: the task was pickled with its recipe's module by name
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), str(ROOT / "recipes")]),
        }
        cluster = beside_cluster(args.idle_actors, rung, env, tmp) if rung in BESIDE else None
        try:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--rung", rung, str(tmp / "spec.json")],
                capture_output=True,
                text=True,
                cwd=tmp,
                env=env,
                timeout=1800,
            )
        finally:
            if cluster is not None:
                cluster.stdin.close()
                cluster.wait(timeout=120)
        if done.returncode != 0:
            raise SystemExit(f"rung {rung} ({framework}) exited with {done.returncode}:\n{done.stderr[-4000:]}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        span = steady_span(got)
    got["wall_s"] = time.time() - began
    if span:
        machine = busy.cores(*span)
        if machine is not None:
            got["machine_cores"] = machine
    return got


def beside_cluster(actors: int, rung: str, env: dict, tmp: Path) -> subprocess.Popen:
    """The beside rung's idle cluster, up with its actors, and SETTLE_S more for its start-up's CPU to pass."""
    idle = ["chrt", "--idle", "0"] if rung == "beside+sched_idle" else []
    cluster = subprocess.Popen(
        idle + [sys.executable, str(Path(__file__).resolve()), "--cluster", str(actors), rung],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp,
        env=env,
    )
    if cluster.stdout.readline().strip() != "up":
        cluster.kill()
        raise SystemExit(f"the beside rung's idle cluster did not start (exit {cluster.wait()})")
    time.sleep(SETTLE_S)  # a wait for nothing but time: the cluster's start-up CPU is not what is measured
    return cluster


def describe(ratios: list[float]) -> str:
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    from loop_cost import sign_flip_p

    p = sign_flip_p([math.log(r) for r in ratios])
    return (
        f"median {statistics.median(ratios):.3f}x, quartiles {q[0]:.3f}..{q[2]:.3f}, range {min(ratios):.3f}.."
        f"{max(ratios):.3f}, p = {p:.3f}"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--frameworks", default="torch,tf", help="comma-separated from torch, tf, jax (default: %(default)s)"
    )
    p.add_argument(
        "--rungs",
        default=",".join(RUNGS),
        help="comma-separated from plain (always run), beside, beside+sched_idle, beside+no_dashboard, task, train, "
        "trial, and trial+NAME=VALUE[+NAME=VALUE] (the trial with those environment variables set, e.g. "
        "trial+RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=2) (default: %(default)s)",
    )
    p.add_argument("--rounds", type=int, default=9, help="rounds per framework (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=1, help="epochs of every side (default: %(default)s)")
    p.add_argument("--recipe", default="fashion", help="a recipe in recipes/ (default: %(default)s)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument(
        "--idle-actors", type=int, default=8, help="idle actors of the beside rung's cluster (default: %(default)s)"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write every side's figures here")
    p.add_argument("--rung", nargs=2, metavar=("RUNG", "SPEC"), help=argparse.SUPPRESS)  # one rung's own process
    p.add_argument("--cluster", nargs=2, help=argparse.SUPPRESS)  # the beside rung's idle cluster: ACTORS RUNG
    args = p.parse_args()
    if args.rung:
        return run_rung(*args.rung)
    if args.cluster is not None:
        return idle_cluster(int(args.cluster[0]), args.cluster[1])
    frameworks = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    rungs = ["plain"] + [r.strip() for r in args.rungs.split(",") if r.strip() and r.strip() != "plain"]
    bad = [r for r in rungs if r not in RUNGS + BESIDE and not r.startswith("trial+")] + [
        f for f in frameworks if f not in TRIAL
    ]
    if bad or args.rounds < 1 or args.epochs < 1:
        p.error(
            f"unknown rung or framework {bad}, or --rounds/--epochs below 1"
            if bad
            else "--rounds and --epochs must be at least 1"
        )
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes"), str(BENCH)]
    import importlib

    import cloudpickle

    from raylab.data import as_dataset

    recipe = importlib.import_module(args.recipe).RECIPE.with_batch(args.batch)
    ds = as_dataset(recipe.data, recipe.name)
    busy = Busy()
    print(
        f"{args.recipe}, batch {args.batch}, {args.threads} thread(s), {args.epochs} epoch(s) a side, {args.rounds} "
        f"round(s), rungs {', '.join(rungs)}, order rotated each round; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    rows: dict[str, list[dict]] = {f: [] for f in frameworks}
    with tempfile.TemporaryDirectory(prefix="raylab-ladder-") as tmp:
        tmp = Path(tmp)
        (tmp / "task.pkl").write_bytes(
            cloudpickle.dumps((recipe.task(ds.target_names), (ds.x_train, ds.y_train, ds.x_test, ds.y_test)))
        )
        spec = {
            "task": str(tmp / "task.pkl"),
            "threads": args.threads,
            "epochs": args.epochs,
            "steps_per_epoch": None,
            "batch": args.batch,
            "seed": 0,
            "warmup": recipe.warmup_steps,
            "window": 32,
            "tmp": str(tmp),
        }
        for r in range(args.rounds):
            for framework in frameworks:
                (tmp / "spec.json").write_text(json.dumps({**spec, "framework": framework}))
                order = rungs[r % len(rungs) :] + rungs[: r % len(rungs)]
                got = {rung: side(rung, framework, args, tmp, busy) for rung in order}
                rows[framework].append(got)
                base = got["plain"]["samples_per_sec"]
                cells = []
                for rung in rungs:
                    g = got[rung]
                    others = f", machine {g['machine_cores']:.2f} cores" if "machine_cores" in g else ""
                    cells.append(f"{rung} {g['samples_per_sec']:,.0f} ({g['samples_per_sec'] / base:.3f}{others})")
                print(f"round {r + 1} {framework} [{' > '.join(order)}]: " + "; ".join(cells), flush=True)
    print()
    for framework in frameworks:
        print(f"{framework}: {args.rounds} round(s), samples/s of each rung over the plain process's, same round")
        below = "plain"
        for rung in rungs[1:]:
            to_plain = [g[rung]["samples_per_sec"] / g["plain"]["samples_per_sec"] for g in rows[framework]]
            machine = [g[rung].get("machine_cores") for g in rows[framework] if g[rung].get("machine_cores")]
            busy_s = f"; machine busy {statistics.median(machine):.2f} cores" if machine else ""
            print(f"  {rung} / plain: {describe(to_plain)}{busy_s}")
            if below != "plain":
                step = [g[rung]["samples_per_sec"] / g[below]["samples_per_sec"] for g in rows[framework]]
                print(f"  {rung} / {below}: {describe(step)}")
            below = rung
        plain_busy = [g["plain"].get("machine_cores") for g in rows[framework] if g["plain"].get("machine_cores")]
        if plain_busy:
            print(f"  plain: machine busy {statistics.median(plain_busy):.2f} cores")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
