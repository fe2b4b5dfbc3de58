"""A training recipe's command line, in argument groups: what to run, the task, where, recording, failures."""

from __future__ import annotations

import argparse

from raylab import config
from pathlib import Path

from raylab.cli import cluster_flags, flags
from raylab.registry import kinds
from raylab.task import OPTIMIZERS


def recipe_parser(recipe) -> argparse.ArgumentParser:
    p = flags.parser(recipe.name, recipe.doc)
    what = p.add_argument_group("what to run")
    _what_to_run(what, recipe)
    _how_timed(what)
    task = p.add_argument_group("the task (the recipe's, edited for this run)")
    _task(task, recipe)
    _length(task, recipe)
    _numerics(task, recipe)
    where = p.add_argument_group("where to run")
    flags.add_where(where, "replica", sweep=True)
    cluster_flags.add_placement(where)
    recording = p.add_argument_group("recording")
    flags.add_recording(recording, recipe.name)
    recording.add_argument(
        "--prices",
        type=Path,
        default=None,
        metavar="FILE",
        help="what the nodes cost: a JSON object of node type (its accelerator type, else cpu) -> US "
        'dollars an hour, e.g. {"cpu": 0.10, "H200": 3.72}; each trial records cost_usd (its '
        "wall time on the nodes it held) and cost_to_target_usd, and the comparison names the "
        "cheapest trial to the target",
    )
    recording.add_argument(
        "--verbose",
        action="store_true",
        help="also show Ray's, TensorFlow's, XLA's and gloo's output live; by default it goes "
        "only to a log file per trial under raylab-logs/ (an artifact of the trial's MLflow "
        "run, named when a trial fails)",
    )
    cluster_flags.add_fault_tolerance(p.add_argument_group("fault tolerance"))
    return p


def _what_to_run(g, recipe) -> None:
    """The trial matrix and how each trial is measured."""
    g.add_argument(
        "--trials",
        default=",".join(recipe.default_trials),
        help="comma-separated framework:strategy list, each on every --workers count it supports, "
        "or with its own count: 'tf:none,tf:mwms x2' (default: %(default)s); "
        f"known: {', '.join(sorted(kinds()))}",
    )
    g.add_argument(
        "--workers",
        default=",".join(map(str, recipe.default_workers)),
        help="comma-separated replica counts, each trial runs on each (default: %(default)s)",
    )
    g.add_argument(
        "--ps",
        type=flags.integer,
        default=1,
        help="parameter servers for tf:ps and torch:ps-* trials, beside --workers workers (default: %(default)s)",
    )
    g.add_argument(
        "--data",
        metavar="DIR",
        help="stream the data from Parquet files instead of the recipe's own: a directory `raylab data "
        "export` wrote (local, or a gs:// / s3:// URI holding train/ and test/ with columns x and y); "
        "Ray Data reads it as the trials train, nothing is loaded on the driver",
    )
    g.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {recipe.quick_train} train / {recipe.quick_test} test items, 1 epoch",
    )
    flags.add_repeats(g)
    g.add_argument(
        "--plain",
        action="store_true",
        help="also run each framework's 1-worker job as a plain script (no Ray, no raylab; same model, "
        "data, batch, threads, seed), beside the trials: the comparison shows raylab's overhead",
    )
    g.add_argument(
        "--baseline",
        dest="plain",
        nargs=0,
        action=flags.Renamed,
        new="--plain",
        help="the old name of --plain (goes in 0.4.0)",
    )


def _how_timed(g) -> None:
    """How each trial's steps are run and read back: the window, the execution, per-step latencies."""
    g.add_argument(
        "--window",
        type=flags.integer,
        default=config.DEFAULT_WINDOW,
        metavar="K",
        help="training steps between host reads: loss and metrics add up on the device and are read "
        "once per K steps (and at each epoch's end); TF runs the K steps as one tf.function call "
        "(default: %(default)s)",
    )
    _execution(g)
    g.add_argument(
        "--step-latency",
        action="store_true",
        help="read back after every step (--window 1) so step_time_p50/p90 are per-step latencies; "
        "slower, and recorded as step_timing='per step (synced)'",
    )


def _execution(g) -> None:
    """--compile and its mode and cache: how each trial's steps execute, an axis like --workers."""
    g.add_argument(
        "--compile",
        default="best",
        metavar="best|off|on|off,on",
        help="how the steps execute. best = measured: before the trials, each framework's candidates "
        "(torch eager and torch.compile with Inductor; TF's tf.function and XLA; jax is jit and "
        "torch_xla its graphs either way) run a few steps of the recipe's own model, batch, "
        "precision and device, and every trial trains in the faster; the answer is kept per host "
        "(~/.cache/raylab/kept.json, `raylab probes`) for the next run of the same recipe. off = each "
        "framework's usual way (torch eager, TF's tf.function); on = compiled; 'off,on' runs each "
        "trial both ways, side by side, named '... inductor', '... xla'. Recorded as execution "
        "(with execution_candidates under best); the parity report compares it (default: "
        "%(default)s)",
    )
    g.add_argument(
        "--race-again",
        action="store_true",
        help="--compile best: measure the candidates again instead of reading this host's kept answer",
    )
    g.add_argument(
        "--compile-mode",
        default="default",
        metavar="MODE[,MODE...]",
        help="the mode of torch.compile for compiled torch trials, each its own trial: default, "
        "reduce-overhead (CUDA graphs: GPU only) or max-autotune (default: %(default)s)",
    )
    g.add_argument(
        "--compile-cache",
        choices=["warm", "cold"],
        default="warm",
        help="compiled code (Inductor's cache, jax's persistent compilation cache): 'warm' keeps it in "
        "one directory per invocation that the trials and workers on a node share, so a model "
        "compiles once per node; 'cold' gives every trial an empty one. Recorded as compile_cache "
        "(default: %(default)s)",
    )


def _task(g, recipe) -> None:
    """What people sweep or change in a recipe's task. A flag that is also a --set key defaults to None, so
    the recipe as --set edited it decides unless the flag is given (make_config resolves them)."""
    batch_what = "global batch (split over the replicas)" if recipe.global_batch else "batch per replica"
    g.add_argument(
        "--batch",
        default=None,
        metavar="B[,B...]|max",
        help=f"{batch_what}; several sizes make a sweep axis like --workers: every trial runs at each, "
        f"named '... bB'. 'max': before each trial of {_searchable()}, find the largest batch "
        "per replica whose training steps run without running out of memory (under --memory-cap-mb, "
        "if given, each size probed in fresh processes; doubling, then bisecting to one item) and run "
        f"the trial at it, recording the search (default: {recipe.global_batch or recipe.batch_per_replica})",
    )
    opt = recipe.optimizer
    g.add_argument(
        "--optimizer",
        default=None,
        choices=sorted(OPTIMIZERS),
        help="the optimizer, keeping the recipe's learning rate and the arguments it takes (default: "
        f"{getattr(opt, 'name', 'custom')})",
    )
    g.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"learning rate (default: {getattr(opt, 'lr', 'set by the custom optimizer')})",
    )
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change any recipe field for this run, e.g. --set epochs=3, --set optimizer.momentum=0.9, "
        "--set schedule.name=cosine, --set schedule.warmup=100 (repeatable; recorded as params); "
        "a flag given beside it (--epochs, --seed, ...) wins",
    )


def _length(g, recipe) -> None:
    """How long each trial trains: epochs, steps in each, or seconds of steady steps."""
    g.add_argument(
        "--epochs",
        type=flags.integer,
        default=None,
        help=f"passes over the data (default: {recipe.epochs}; 1 with --quick)",
    )
    g.add_argument(
        "--steps-per-epoch",
        type=flags.integer,
        default=None,
        metavar="N",
        help="training steps per epoch, the data repeating as needed; 0 = one pass over each worker's "
        "shard (default: "
        + (f"{recipe.steps_per_epoch}" if recipe.steps_per_epoch else "one pass")
        + "; one pass with --quick)",
    )
    g.add_argument(
        "--seconds",
        type=float,
        default=None,
        metavar="S",
        help="end each trial at the window its steady steps (after the warm-up) reach S seconds, its "
        "epochs and steps the most it runs: every figure timed long enough to compare (5 s is the "
        "least), in bounded time; its accuracy then comes from as many steps as it took, not "
        "compared. Trials of one training process only (default: every epoch)",
    )


def _numerics(g, recipe) -> None:
    """The seed and the precision a trial runs with."""
    flags.add_seed(g, "init, shuffle and shard seed", recipe.seed, set_key=True)
    flags.add_precision(
        g,
        "bf16 by torch (autocast, CPU and CUDA), TF (Keras mixed_bfloat16), JAX, and xla on a TPU; "
        "fp16 with a dynamic loss scale by torch:none/ddp and tf:none/mirrored/mwms (emulated and slow "
        "on CPUs); a trial that cannot apply it stops the command before Ray starts",
        recipe.precision,
        set_key=True,
    )
    g.add_argument(
        "--precision-fallback",
        choices=["error", "fp32"],
        default="error",
        help="a trial that cannot apply --precision: 'error' stops before Ray starts (default); 'fp32' runs "
        "it in fp32 and records precision_applied=fp32 and precision_fallback_reason",
    )


def _searchable() -> str:
    """The kinds --batch max searches, from the registry (the others run at the recipe's batch)."""
    from raylab.registry import get_strategy, kinds

    return ", ".join(k for k in sorted(kinds()) if get_strategy(k).batch_search)
