"""A step benchmark's command line (raylab.driver.stepbench): the where-to-run and recording flags of a recipe's."""

from __future__ import annotations

import argparse
import sys

from raylab import config
from raylab.cli.expand import check_positive, parse_trials
from raylab.cli import flags
from raylab.errors import UserError
from raylab.settings import resolve


def bench_parser(bench) -> argparse.ArgumentParser:
    from raylab.task.recipe import single_kinds

    p = flags.parser(bench.name, bench.doc)
    what = p.add_argument_group("what to run")
    what.add_argument(
        "--trials",
        default=",".join(bench.default_trials),
        help=f"comma-separated trials (default: %(default)s); known: {', '.join(single_kinds())}",
    )
    what.add_argument(
        "--iterations",
        type=flags.integer,
        default=bench.iterations,
        help=f"timed {bench.what}s per trial, after {bench.warmup} warm-up ones (default: %(default)s)",
    )
    what.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: batch {bench.quick_batch}, 1 warm-up + {bench.quick_iterations} timed {bench.what}s",
    )
    flags.add_repeats(what)
    flags.add_seed(what, "seed of the synthetic inputs and weights", 0)
    flags.add_precision(what, "bf16 only, as autocast on CUDA (torch) and XLA TPU", "fp32")
    flags.add_where(p.add_argument_group("where to run"), "trial")
    flags.add_recording(p.add_argument_group("recording"), bench.name)
    return p


def bench_config(bench, args) -> config.Settings:
    """The step benchmark's Settings, its trials resolved and refused as a recipe's are (settings.resolve)."""
    kinds = parse_trials(args.trials)
    cfg = config.Settings(
        trials=[config.TrialSpec(*k.split(":"), 1) for k in kinds],
        epochs=1,
        threads=check_positive("threads", args.threads),
        seed=args.seed,
        quick=args.quick,
        tracking_uri=args.tracking_uri or config.default_tracking_uri(),
        experiment=args.experiment,
        json_path=args.json,
        precision=args.precision,
        device=args.device,
        steps_per_epoch=check_positive("iterations", args.iterations),
        repeats=check_positive("repeats", args.repeats),
    )
    resolve.check_bench(bench.name, cfg)
    return cfg


def bench_main(bench, argv: list[str] | None = None) -> int:
    """Runs a step benchmark's trials (raylab.driver.stepbench), then the comparison."""
    from raylab.cli.session import stoppable

    args = bench_parser(bench).parse_args(argv)
    return stoppable(lambda: _run(bench, args))


def _run(bench, args) -> int:
    from raylab.cli.session import connect, run_to_end
    from raylab.driver.stepbench import run_bench

    try:
        cfg = bench_config(bench, args)
        tracker = connect(cfg, args.address)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    return run_to_end(cfg, tracker, lambda tags: run_bench(bench, cfg, tracker, tags))
