"""What raylab's loop costs a 1-worker trial against the best plain code, torch, TF and JAX, interleaved.

On the fashion MLP (recipes/fashion.py), a user's pre-norm residual MLP with LayerNorm, dropout, AdamW and a cosine
schedule (recipes/residual_mlp.py: `--recipe residual_mlp`), or both in one interleaved run (`--recipe
fashion,residual_mlp --batch 32,64`). The trial runs as a user runs it, `--compile best` (the
default): each framework's execution raced first (kept on this host after the first round); the plain side runs in
the execution the trial chose (Keras `jit_compile` as the trial's, torch.compile where the trial compiled).

For each framework and round it runs, one after the other (the order alternating between rounds, so the
machine's drift falls on both sides alike), each as its own process:

- the raylab trial: `recipes/RECIPE.py --trials torch:none|tf:none|jax:none --workers 1 --batch B --threads 1`
  (its own in-process Ray cluster), its steady-state samples/s as the trial records it (raylab/timing.py
  Chrono: windows of 32 steps from one host read to the next, after the warm-up, evaluation left out);
- the plain script a careful user writes, no Ray and no raylab loop, same model, data, loss, optimizer,
  batch, seed and intra-op threads (the task as raylab.driver.plain_runs hands it to raylab/frameworks/plain.py):
  - torch: the usual loop keeping the running loss and accuracy sums on the device (`loss_sum +=
    loss.detach()`, `correct += (logits.argmax(-1) == y).sum()`) and reading them once every 32 steps,
    as Keras fit does, its optimizer fused (`fused=True`: torch's fastest Adam, AdamW and SGD); defined below
    (`plain_torch`);
  - tf: Keras `compile(steps_per_execution=32)` and `fit` (raylab/frameworks/tf/plain.py `run`, loss only);
  - jax: one jitted step with the train state donated, numpy batches of a shuffled permutation, the running
    loss and metric sums kept on the device and read every 32 steps (raylab/frameworks/jax/plain.py `run`).

Both sides are timed the same way: the same Chrono over the same windows (raylab.loop.windows: the
first step alone, then windows of 32 steps from one host read to the next, the recipe's warm-up left out,
the epoch-end evaluation outside every window). Prints each round's trial/plain ratio of steady-state
samples/s and the median, with what each side ran at (niceness, CPU affinity, the GIL switch interval,
intra/inter-op threads; the trial's from its MLflow tags).

**Long enough to mean something.** Each framework trains enough epochs that each side has at least
`--min-steady-s` (5) seconds of steady steps: before the first round, a 1-epoch plain run per framework measures
its steady seconds per epoch, and the framework's epochs are raised from `--epochs` to cover the floor with half
again to spare (JAX's fashion MLP runs an epoch in about a second, torch's in four). Both sides of a framework
train the same epochs, so they time the same number of steady steps (each printed); a side that still has under
the floor is marked SHORT, and a median that rests on one says so.

    flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py                  # torch and tf, 3 rounds
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py --frameworks torch,tf,jax --rounds 5
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py --recipe residual_mlp --batch 64 \
        --frameworks torch,tf,jax --rounds 5
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py --recipe fashion,residual_mlp --batch 32,64 \
        --frameworks torch,tf,jax --rounds 5 --pin-cpus both        # the yardstick of issue 71
    flock /tmp/raylab-heavy.lock .venv/bin/python bench/loop_cost.py --recipe fashion,residual_mlp,char_lm \
        --batch 32,64,64 --steps-per-epoch 0,0,128 --frameworks torch,tf,jax --rounds 9 --epochs 1   # issue 80's

`--steps-per-epoch` cuts an epoch short on both sides alike (the transformer's whole epoch is 512 steps, 35-70 s
here; 128 steps and the floor's extra epochs still give each side over 5 s of steady steps).

Target: median >= 0.95x for each. Each median comes with p, the share of the 2^n sign flips of the rounds' log
ratios whose mean is at least as far from 0 (bench/studies/ladder.py's test): under 0.05, the ratio differs from 1
beyond the rounds' noise.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIAL = {"torch": "torch:none", "tf": "tf:none", "jax": "jax:none"}
SPARE = 1.5  # epochs for this many times --min-steady-s, by a 1-epoch plain run's rate


def process_facts() -> dict:
    """What this process ran at: the conditions a fair comparison must share (and record)."""
    return {
        "niceness": os.nice(0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "switch_interval": sys.getswitchinterval(),
    }


# --- the plain side (runs in its own process: `loop_cost.py --plain SPEC.json`) --------------------------------


def plain_torch(spec: dict, task, x, y, xt, yt) -> dict:
    """The usual torch loop, the running loss and accuracy sums kept on the device, read every `window` steps."""
    import torch

    from raylab.frameworks.torch.task import TorchTask, to_tensors
    from raylab.loop import windows
    from raylab.timing import Chrono

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(spec["seed"])
    n, batch = len(y), spec["batch"]
    steps = spec["steps_per_epoch"] or n // batch
    tt = TorchTask(task, steps * spec["epochs"])
    xs, ys = to_tensors(tt.inputs(x)), to_tensors(tt.targets(y))
    test = (to_tensors(tt.inputs(xt)), to_tensors(tt.targets(yt)))
    model = tt.build_model().train()
    opt, scheduler = tt.build_optimizer(model.parameters())  # fused (TorchTask.fused), as a careful user's
    assert opt.defaults.get("fused"), "the yardstick's optimizer is torch's fused one"
    from raylab.frameworks.torch.plain import compiled_as

    compiled, loss_of, _ = compiled_as(tt, model, spec.get("execution") or "eager")  # as the trial ran
    evaluate = tt.evaluator(model, torch.device("cpu"))
    gen = torch.Generator().manual_seed(spec["seed"])
    chrono, done, epochs = Chrono(spec["start"], spec["warmup"]), 0, []
    for epoch in range(1, spec["epochs"] + 1):
        order = torch.randperm(n, generator=gen)[: steps * batch].split(batch)
        it = iter(order)
        sums = [torch.zeros(()), torch.zeros((), dtype=torch.int64)]  # running loss, correct predictions
        for k in windows(steps, spec["window"], chrono.warmup, done):
            chrono.start()
            running = plain_steps(k, tt, compiled, opt, scheduler, xs, ys, it, sums, loss_of)  # one read
            chrono.stop(k)
            done += k
        epochs.append(
            {
                "epoch": epoch,
                "train_loss": running[0] / steps,
                "train_accuracy": running[1] / (steps * batch * ys[0].numel()),  # per label: a sequence holds many
                **evaluate(*test),
            }
        )
    from raylab.frameworks.plain import timed

    return {
        **timed(chrono, batch, spec.get("trace")),
        "epochs": epochs,
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
    }


def plain_steps(k: int, tt, model, opt, scheduler, xs, ys, batches, sums, loss_of=None) -> list[float]:
    """k steps of the usual torch loop on the index batches `batches` gives, the running loss and correct-prediction
    count added into `sums` on the device; then their one read."""
    import torch

    from raylab.frameworks.torch.task import take

    for _ in range(k):
        idx = next(batches)
        xb, yb = take(xs, idx), take(ys, idx)
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = loss_of(yb, logits) if loss_of else tt.per_example_loss(yb, logits).mean()
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        with torch.no_grad():
            sums[0] += loss.detach()
            sums[1] += (logits.argmax(-1) == yb).sum()
    return torch.stack([sums[0], sums[1].to(sums[0].dtype)]).tolist()


def plain_main(spec_path: str) -> None:
    import cloudpickle

    start = time.time()
    spec = json.loads(Path(spec_path).read_text())
    with open(spec["task"], "rb") as f:
        task, (x, y, xt, yt) = cloudpickle.load(f)
    spec = {**spec, "start": start}
    if spec["framework"] in ("tf", "jax"):
        from raylab.registry import framework

        result = framework(spec["framework"]).part("plain").run(spec, task, x, y, xt, yt)
        result.setdefault("intra_op_threads", os.environ.get("PJRT_NPROC"))
    else:
        result = plain_torch(spec, task, x, y, xt, yt)
    print(json.dumps({**result, **process_facts()}))


# --- the driver ------------------------------------------------------------------------------------------------


def run_trial(framework: str, args, tmp: Path, epochs: int, pin: bool = False, extra_env: dict | None = None) -> dict:
    from mlflow.tracking import MlflowClient

    out, uri = tmp / "trial.json", f"sqlite:///{tmp}/mlflow.db"
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / f"{args.recipe}.py"),
        "--trials",
        TRIAL[framework],
        "--workers",
        "1",
        "--epochs",
        str(epochs),
        "--batch",
        str(args.batch),
        "--threads",
        str(args.threads),
        "--experiment",
        "bench-loop-cost",
        "--tracking-uri",
        uri,
        "--json",
        str(out),
    ]
    cmd += (["--steps-per-epoch", str(args.steps_per_epoch)] if args.steps_per_epoch else []) + (
        ["--pin-cpus"] if pin else []
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **(extra_env or {}),
    }  # this tree's raylab, not the venv's editable one
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(
            f"{TRIAL[framework]}: exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    (trial,) = json.loads(out.read_text())["trials"]
    run = MlflowClient(uri).get_run(trial["run_id"]).data
    tags, metrics = run.tags, run.metrics
    facts = {
        k: tags.get(k)
        for k in (
            "niceness",
            "intra_op_threads",
            "inter_op_threads",
            "cpu_pinning",
            "worker_switch_interval",
            "execution",
            "optimizer_impl",
        )
        if tags.get(k) is not None
    }
    return {
        "samples_per_sec": trial["samples_per_sec"],
        "val_accuracy": trial["val_accuracy"],
        "steady_s": metrics.get("steady_s"),
        "steady_steps": metrics.get("steady_steps"),
        **facts,
    }


def run_plain(framework: str, args, tmp: Path, data, epochs: int, execution: str | None = None) -> dict:
    from raylab import registry

    spec = {
        "framework": framework,
        "task": str(tmp / "task.pkl"),
        "threads": args.threads,
        "epochs": epochs,
        "steps_per_epoch": args.steps_per_epoch or None,
        "batch": args.batch,
        "seed": 0,
        "warmup": data["warmup"],
        "window": 32,
        "execution": execution,
    }
    (tmp / "spec.json").write_text(json.dumps(spec))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--plain", str(tmp / "spec.json")]
    done = subprocess.run(
        cmd, capture_output=True, text=True, cwd=tmp, env=registry.framework(framework).plain_env(args.threads)
    )
    if done.returncode != 0:
        raise SystemExit(f"plain {framework}: exited with {done.returncode}:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["val_accuracy"] = result["epochs"][-1].get("val_accuracy")
    return result


def epochs_for(framework: str, args, tmp: Path, data) -> int:
    """Epochs that give each side at least --min-steady-s of steady steps: --epochs, or more where a 1-epoch plain run's
    steady rate says that --epochs of them fall short (with half again to spare: the machine's drift between the
    calibration and a round put a tenth's spare under the floor in 2026-12-02's run; the first epoch's warm-up
    aside)."""
    if args.min_steady_s <= 0:
        return args.epochs
    one = run_plain(framework, args, tmp, data, 1)
    per_epoch = (args.steps_per_epoch or data["steps"]) * args.batch / one["samples_per_sec"]
    warmup = data["warmup"] * args.batch / one["samples_per_sec"]
    epochs = max(args.epochs, math.ceil((SPARE * args.min_steady_s + warmup) / per_epoch))
    print(
        f"{framework}: a plain epoch is {per_epoch:.2f} s of steps: {epochs} epoch(s) for at least "
        f"{args.min_steady_s:g} s of steady steps a side",
        flush=True,
    )
    return epochs


def sign_flip_p(logs: list[float]) -> float:
    """Two-sided exact permutation test of mean(logs) = 0: the share of the 2^n sign flips whose |mean| is at least
    the observed one (n <= 16; beyond that, 65,536 random flips)."""
    import random

    n = len(logs)
    if n == 0:
        return float("nan")
    observed = abs(sum(logs)) - 1e-12
    flips = (
        itertools.product((1, -1), repeat=n)
        if n <= 16
        else ([random.Random(k).choice((1, -1)) for _ in range(n)] for k in range(65536))
    )
    total = hits = 0
    for signs in flips:
        total += 1
        hits += abs(sum(s * v for s, v in zip(signs, logs))) >= observed
    return hits / total


def steady(side: dict, floor: float) -> str:
    """A side's steady seconds and steps, SHORT under the floor."""
    s, n = side.get("steady_s"), side.get("steady_steps")
    if s is None:
        return "steady ? s"
    return f"steady {s:.1f} s / {n:.0f} steps" + (" SHORT" if s < floor else "")


def cases(args) -> list[argparse.Namespace]:
    """One set of arguments per `--recipe` (comma-separated), each with its batch: `--batch` gives one for all or one
    per recipe, in order."""
    recipes = [r.strip() for r in args.recipe.split(",")]

    def each(flag: str, given) -> list[int]:
        values = [int(b) for b in str(given).split(",")]
        if len(values) not in (1, len(recipes)):
            raise SystemExit(f"--{flag} {given}: give one, or one per recipe ({len(recipes)}: {args.recipe})")
        return values * len(recipes) if len(values) == 1 else values

    return [
        argparse.Namespace(**{**vars(args), "recipe": r, "batch": b, "steps_per_epoch": n})
        for r, b, n in zip(recipes, each("batch", args.batch), each("steps-per-epoch", args.steps_per_epoch))
    ]


def prepare(case: argparse.Namespace, tmp: Path) -> dict:
    """The recipe's task and data pickled for the plain side; its warm-up and steps per epoch."""
    import importlib

    import cloudpickle

    from raylab.data import as_dataset

    recipe = importlib.import_module(case.recipe).RECIPE.with_batch(case.batch)
    ds = as_dataset(recipe.data, recipe.name)
    tmp.mkdir()
    (tmp / "task.pkl").write_bytes(
        cloudpickle.dumps((recipe.task(ds.target_names), (ds.x_train, ds.y_train, ds.x_test, ds.y_test)))
    )
    return {"warmup": recipe.warmup_steps, "steps": len(ds.y_train) // case.batch}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--recipe",
        default="fashion",
        help="recipes under recipes/, comma-separated: fashion, residual_mlp, char_lm (the transformer), "
        "interleaved in each round (default: %(default)s)",
    )
    p.add_argument(
        "--frameworks", default="torch,tf", help="comma-separated from torch, tf, jax (default: %(default)s)"
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="epochs at least (more where --min-steady-s needs them)")
    p.add_argument(
        "--min-steady-s",
        type=float,
        default=5.0,  # raylab.compare.parity.STEADY_FLOOR_S
        help="seconds of steady steps each side has at least: a framework's epochs are raised to give "
        "them (0: --epochs as given; default: %(default)s)",
    )
    p.add_argument("--batch", default="32", help="the batch, or one per recipe, comma-separated (default: %(default)s)")
    p.add_argument(
        "--steps-per-epoch",
        default="0",
        help="steps an epoch on both sides, or one per recipe, comma-separated; 0: the whole training set (default). "
        "Shortens the transformer's 512-step epochs (--min-steady-s still raises the epochs)",
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--pin-cpus",
        choices=["off", "on", "both"],
        default="off",
        help="the trial with raylab's --pin-cpus: off, on, or both (each round runs the trial either "
        "way beside the plain loop, interleaved; a trial that pinning leaves unpinned, 'not "
        "applied', is not run pinned again; default: %(default)s)",
    )
    p.add_argument(
        "--trial-env",
        metavar="NAME=VALUE[,NAME=VALUE]",
        help="one more side each round: the trial with these in its environment (e.g. "
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S=2, Ray's default poll), beside the trial without them",
    )
    p.add_argument("--plain", metavar="SPEC", help=argparse.SUPPRESS)  # the plain side's own process
    args = p.parse_args()
    extra = dict(kv.split("=", 1) for kv in args.trial_env.split(",")) if args.trial_env else {}
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes")]
    if args.plain:
        return plain_main(args.plain)
    frameworks = [f.strip() for f in args.frameworks.split(",")]
    runs = cases(args)
    print(
        f"{', '.join(f'{c.recipe} at batch {c.batch}' for c in runs)}; {args.threads} thread(s), {args.epochs} "
        f"epoch(s) or more, {args.rounds} round(s), interleaved; driver: {process_facts()}, "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    trials = {"off": ["trial"], "on": ["pinned"], "both": ["trial", "pinned"]}[args.pin_cpus] + (
        ["env"] if extra else []
    )
    label = {
        "trial": TRIAL,
        "pinned": {f: f"{k} --pin-cpus" for f, k in TRIAL.items()},
        "env": {f: f"{k} {args.trial_env}" for f, k in TRIAL.items()},
    }
    keys = [(c.recipe, f, t) for c in runs for f in frameworks for t in trials]
    ratios: dict[tuple[str, str, str], list[float]] = {key: [] for key in keys}
    shorts: dict[tuple[str, str, str], int] = {key: 0 for key in keys}
    unpinned: dict[tuple[str, str], str] = {}  # (recipe, framework) -> why --pin-cpus left its trial unpinned
    with tempfile.TemporaryDirectory(prefix="raylab-loop-cost-") as top:
        data = {c.recipe: prepare(c, Path(top) / c.recipe) for c in runs}
        epochs = {
            (c.recipe, f): epochs_for(f, c, Path(top) / c.recipe, data[c.recipe]) for c in runs for f in frameworks
        }
        # (recipe, framework) -> the execution its trial ran (--compile best's choice): the plain side's
        chosen: dict = {}
        for r in range(args.rounds):
            for case in runs:
                tmp, name = Path(top) / case.recipe, case.recipe
                for framework in frameworks:
                    key, mine = (
                        (name, framework),
                        [t for t in trials if t != "pinned" or (name, framework) not in unpinned],
                    )
                    sides = [*mine, "plain"] if r % 2 == 0 else ["plain", *reversed(mine)]
                    got = {}
                    for side in sides:
                        got[side] = (
                            run_plain(framework, case, tmp, data[name], epochs[key], chosen.get(key))
                            if side == "plain"
                            else run_trial(
                                framework,
                                case,
                                tmp,
                                epochs[key],
                                pin=side == "pinned",
                                extra_env=extra if side == "env" else None,
                            )
                        )
                        if side != "plain":
                            chosen[key] = got[side].get("execution")
                    pl = got["plain"]
                    pfacts = {
                        k: pl[k]
                        for k in (
                            "execution",
                            "niceness",
                            "affinity",
                            "switch_interval",
                            "intra_op_threads",
                            "inter_op_threads",
                        )
                        if k in pl
                    }
                    for side in mine:
                        t = got[side]
                        ratio = t["samples_per_sec"] / pl["samples_per_sec"]
                        if side == "pinned" and str(t.get("cpu_pinning", "")).startswith("not applied"):
                            unpinned[key] = t["cpu_pinning"]  # the same run as the unpinned trial's: not counted
                        else:
                            ratios[name, framework, side].append(ratio)
                            shorts[name, framework, side] += any(
                                (x.get("steady_s") or 0) < args.min_steady_s for x in (t, pl)
                            )
                        tfacts = {
                            k: v
                            for k, v in t.items()
                            if k not in ("samples_per_sec", "val_accuracy", "steady_s", "steady_steps")
                        }
                        print(
                            f"round {r + 1} {name} {framework:<5} ({' then '.join(sides)}): {label[side][framework]} "
                            f"{t['samples_per_sec']:>9,.0f}  plain {pl['samples_per_sec']:>9,.0f} samples/s  "
                            f"ratio {ratio:.3f}  test acc {t['val_accuracy']:.4f} / {pl['val_accuracy']:.4f}  "
                            f"{epochs[key]} epochs: trial {steady(t, args.min_steady_s)}, plain "
                            f"{steady(pl, args.min_steady_s)}\n"
                            f"      trial ran at {tfacts}; plain at {pfacts}",
                            flush=True,
                        )
    print()
    for (name, framework, side), rows in ratios.items():
        if not rows:
            print(
                f"{name:<13} {label[side][framework]:<23}: {unpinned.get((name, framework), 'no round')}; "
                "not run pinned again (its rounds are the unpinned trial's)"
            )
            continue
        p = sign_flip_p([math.log(x) for x in rows])  # the ladder's test: does the ratio differ from 1?
        print(
            f"{name:<13} {label[side][framework]:<23} / plain, steady-state samples/s: median "
            f"{statistics.median(rows):.3f}x (rounds {', '.join(f'{x:.3f}' for x in rows)}; p {p:.3f}, sign "
            "flips of the log ratios); target >= 0.95x"
            + (
                f"; {shorts[name, framework, side]} round(s) with a side under {args.min_steady_s:g} s of steady "
                "steps: too short to time"
                if shorts[name, framework, side]
                else ""
            )
        )


if __name__ == "__main__":
    main()
