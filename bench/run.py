"""The measurement protocol on the recipes, side by side in one run; writes bench/results.md.

For each recipe it runs the recipe's own command line with --repeats (interleaved, alternating
order) and, for training recipes, --plain: each framework's 1-worker trial beside a plain
single-process script of the same job (raylab/frameworks/plain.py: no Ray, no raylab). The report it keeps is
`raylab compare`'s: medians with their min..max range, which differences are significant, scaling,
the overhead ratios against their targets (whole-job wall <= 1.05x, steady samples/s >= 0.97x),
startup per phase and the parity report. Benchmarks, not tests: the numbers are for reading.

    python bench/run.py                                  # fashion MLP, 1 epoch, 3 repeats, with plain scripts
    python bench/run.py --recipes fashion,conv_bench --repeats 5
    python bench/run.py --epochs 3                       # a longer steady state: its own section, "fashion (3 epochs)"

The whole-job target is for a 1-epoch trial; on the 1-epoch MLP the steady state is about 3 s,
so its samples/s ratio moves with whatever else the machine does in those seconds. `--epochs N`
measures the same trials over N epochs and keeps them apart from the 1-epoch section.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# recipe -> its flags here: the 1-worker trials that mirror the plain scripts, one epoch
RUNS = {
    "fashion": ["--trials", "tf:none,torch:none,xla:single", "--workers", "1", "--epochs", "1", "--plain"],
    "mnist": ["--trials", "tf:none,tf:mirrored,torch:none,torch:ddp", "--epochs", "1", "--plain"],
    "fashion_cnn": ["--trials", "tf:none,torch:none", "--epochs", "1", "--steps-per-epoch", "20", "--plain"],
    "conv_bench": [],
    "resunet": [],
}


def machine() -> str:
    sys.path.insert(0, str(ROOT))
    from raylab.record.provenance import driver_versions, git_commit
    from raylab.loop.worker_config import host_facts

    facts, v = host_facts(), driver_versions()
    return (
        f"{facts['cpu_model']}, {facts['cpu_count']} cores, {platform.system()} {platform.machine()}; "
        f"Python {v['version.python']}, Ray {v['version.ray']}, TF {v['version.tensorflow']}, "
        f"torch {v['version.torch']}, torch_xla {v['version.torch_xla']}, MLflow {v['version.mlflow']}; "
        f"commit {git_commit(ROOT)[:12]}"
    )


def flags(recipe: str, epochs: int | None) -> list[str]:
    """The recipe's bench flags, with --epochs replaced where asked (step benchmarks have none)."""
    args = list(RUNS[recipe])
    if epochs is not None and "--epochs" in args:
        args[args.index("--epochs") + 1] = str(epochs)
    return args


def section(recipe: str, epochs: int | None) -> str:
    return recipe if epochs is None or "--epochs" not in RUNS[recipe] else f"{recipe} ({epochs} epochs)"


def run(recipe: str, repeats: int, threads: int, workdir: Path, epochs: int | None = None) -> tuple[str, str]:
    """(the command, raylab compare's report) for one recipe."""
    args = [
        *flags(recipe, epochs),
        "--repeats",
        str(repeats),
        "--threads",
        str(threads),
        "--experiment",
        f"bench-{recipe}",
        "--tracking-uri",
        f"sqlite:///{workdir}/mlflow.db",
    ]
    out = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / f"{recipe}.py"), *args],
        capture_output=True,
        text=True,
        timeout=4 * 3600,
        cwd=workdir,
    )
    if out.returncode != 0:
        raise SystemExit(f"{recipe} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    report = out.stdout[out.stdout.index(f"experiment 'bench-{recipe}'") :]
    report = "\n".join(line for line in report.splitlines() if not line.startswith(("chart:", "MLflow UI:")))
    shown = " ".join(a for a in args if not a.startswith("sqlite:"))
    return f"python recipes/{recipe}.py {shown}".replace(" --tracking-uri", ""), report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--recipes", default="fashion", help=f"comma-separated, from {', '.join(RUNS)} (default: %(default)s)"
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--epochs", type=int, help="epochs for the training recipes instead of 1 (a section of its own)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results.md")
    args = p.parse_args()
    unknown = [r for r in args.recipes.split(",") if r not in RUNS]
    if unknown:
        p.error(f"unknown recipe(s) {', '.join(unknown)}; choose from {', '.join(RUNS)}")
    if args.epochs is not None and args.epochs < 1:
        p.error("--epochs must be at least 1")

    done: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for recipe in args.recipes.split(","):
            start = time.time()
            command, report = run(recipe, args.repeats, args.threads, Path(tmp), args.epochs)
            name, more = section(recipe, args.epochs), f" --epochs {args.epochs}" if args.epochs else ""
            done[name] = [
                f"## {name}",
                "",
                f"Measured {time.strftime('%Y-%m-%d %H:%M')} on: {machine()}.",
                "",
                f"`{command}` ({(time.time() - start) / 60:.0f} min, from `python bench/run.py --recipes "
                f"{recipe} --repeats {args.repeats} --threads {args.threads}{more}`)",
                "",
                "```",
                report,
                "```",
                "",
            ]
            print(f"{recipe}: done\n{report}", flush=True)
    # Keep the sections of recipes not run this time, and the history under "## Earlier".
    old = args.out.read_text() if args.out.exists() else ""
    body, _, earlier = old.partition("\n## Earlier")
    kept = {}
    for chunk in body.split("\n## ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        kept[name] = ("## " + chunk).rstrip("\n").splitlines() + [""]
    kept.update(done)
    head = [
        "# raylab measured by its own protocol",
        "",
        "Each section is one `bench/run.py` run of one recipe: the recipe's own command line with --repeats "
        "(and --plain for training recipes), and the `raylab compare` report it printed.",
        "",
    ]
    lines = head + [line for name in kept for line in kept[name]]
    args.out.write_text("\n".join(lines) + ("\n## Earlier" + earlier if earlier else ""))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
