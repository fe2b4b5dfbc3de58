"""From a parsed command line to the edited recipe and its Settings, each flag's value checked (a UserError); what
the trials run with, the values together, is resolved and refused in raylab/settings/resolve.py.

A recipe field that is both a flag and a --set key (epochs, steps_per_epoch, seed, precision; --batch
and --lr edit the recipe directly) is decided in one place, `chosen`: the flag when given, else the
recipe as --set left it. The parser's defaults for those flags are None for that reason: a default
taken from the unedited recipe would silently undo a --set.
"""

from __future__ import annotations

import json

from raylab import config
from raylab.errors import UserError
from raylab.cli.expand import check_positive, parse_compile, parse_hardware, parse_trials, parse_workers
from raylab.cli.overrides import parse_batches, set_fields
from raylab.record.prices import read_prices
from raylab.registry import get_strategy
from raylab.settings.resolve import expand_trials, split_trial
from raylab.tpu import parse_topology, parse_tpu_type

# What --resume may be given beside it: where to look and where to run; the rest is the recorded command's.
RESUME_FLAGS = {"resume", "tracking_uri", "experiment", "json", "address", "verbose"}


def edited(recipe, args):
    """The recipe with this command line's --set, --optimizer, --lr and a single --batch applied."""
    from raylab.cli.overrides import apply_overrides

    recipe = apply_overrides(recipe, args.set, args.optimizer, args.lr)
    if getattr(args, "data", None):
        from raylab.data.stream import parquet

        recipe = recipe.variant(data=parquet(args.data))
    batches = parse_batches(args.batch)
    return recipe.with_batch(batches[0]) if len(batches) == 1 else recipe


def chosen(recipe, args, name: str):
    """A field's value given on this command line: its flag if given, else the (edited) recipe's value if a
    --set named it, else None (the run's default applies: the recipe's, or --quick's)."""
    flag = getattr(args, name)
    if flag is not None:
        return flag
    return getattr(recipe, name) if name in set_fields(args.set) else None


def make_config(recipe, args) -> config.Settings:
    """The invocation's config, each flag's value checked; `recipe` is the one edited() returned for these args.
    settings.resolve.check refuses what its trials cannot run, once the data is loaded (cli/run.py)."""
    notes: list[str] = []
    hardware = parse_hardware(args.device, args.accelerator_type)
    trials = _trials(recipe, args, notes, hardware)
    if args.json is not None and not args.json.parent.resolve().is_dir():
        raise UserError(f"--json {args.json}: directory {args.json.parent} does not exist; create it first.")
    return config.Settings(trials=trials, notes=notes, **_task_settings(recipe, args), **_run_settings(args, hardware))


def _trials(recipe, args, notes: list[str], hardware: list[str]) -> list[config.TrialSpec]:
    """The trial matrix (--trials x --workers x a --batch sweep x the --device items), checked against the recipe's
    models and batch."""
    kinds = parse_trials(args.trials)
    workers = parse_workers(args.workers)
    batches = parse_batches(args.batch)
    missing = sorted({get_strategy(split_trial(k)[0]).models for k in kinds} - set(recipe.models))
    if missing:
        raise UserError(
            f"recipe '{recipe.name}' has no model for framework(s) {', '.join(missing)}; "
            f"choose trials of {', '.join(sorted(recipe.models))}."
        )
    compiles = parse_compile(args.compile, args.compile_mode)
    trials = expand_trials(kinds, workers, notes, batches if len(batches) > 1 else [None], compiles, hardware)
    uneven = [s.name for s in trials if recipe.global_batch and recipe.with_batch(s.batch).global_batch % s.workers]
    if uneven:
        raise UserError(
            f"{recipe.name} fixes the global batch at {recipe.global_batch}, which {', '.join(uneven)} "
            "cannot split evenly over its replicas; choose --workers that divide it."
        )
    return trials


def _task_settings(recipe, args) -> dict:
    """Epochs, steps, seed and precision: the flag, else a --set, else --quick's or the recipe's default."""
    epochs = chosen(recipe, args, "epochs")
    epochs = check_positive("epochs", epochs if epochs is not None else (1 if args.quick else recipe.epochs))
    steps = chosen(recipe, args, "steps_per_epoch")
    steps = steps if steps is not None else (None if args.quick else recipe.steps_per_epoch)
    if steps is not None and steps < 0:
        raise UserError(
            f"--steps-per-epoch is {steps}; give a positive number of steps, or 0 for one pass over the data."
        )
    seed, precision = chosen(recipe, args, "seed"), chosen(recipe, args, "precision")
    return {
        "epochs": epochs,
        "steps_per_epoch": steps or None,
        "seconds": args.seconds,
        "seed": recipe.seed if seed is None else seed,
        "precision": precision or recipe.precision,
        "window": 1 if args.step_latency else check_positive("window", args.window),
    }


def _run_settings(args, hardware: list[str]) -> dict:
    """Where the trials run, where they are recorded, and how they survive failures."""
    return {
        "threads": check_positive("threads", args.threads),
        "quick": args.quick,
        "device": hardware[0].partition(":")[0],
        "hardware": hardware,
        "tracking_uri": args.tracking_uri or config.default_tracking_uri(),
        "experiment": args.experiment,
        "json_path": args.json,
        "prices": read_prices(args.prices),
        "tpu_fallback": args.tpu_fallback,
        "precision_fallback": args.precision_fallback,
        "ps": check_positive("ps", args.ps),
        "tpu_type": parse_tpu_type(args.tpu_type),
        "tpu_topology": parse_topology(args.tpu_topology),
        "repeats": check_positive("repeats", args.repeats),
        "plain": args.plain,
        "max_failures": check_failures(args.max_failures),
        "checkpoint_every_min": check_minutes(args.checkpoint_every),
        "storage": args.storage,
        "keep_checkpoints": args.keep_checkpoints,
        "concurrency": args.concurrency,
        "compile_cache": args.compile_cache,
        "race_again": args.race_again,
        "fresh_processes": args.fresh_processes,
        "pin_cpus": args.pin_cpus,
        "share_nodes": args.share_nodes,
        "profile": args.profile,
        "batch_max": (args.batch or "").strip() == "max",
        "memory_cap_mb": None if args.memory_cap_mb is None else check_positive("memory-cap-mb", args.memory_cap_mb),
    }


def check_failures(n: int) -> int:
    if n < -1:
        raise UserError(f"--max-failures is {n}; give 0 (fail at once), a number of restarts, or -1 (no limit).")
    return n


def check_minutes(m: float) -> float:
    if not m >= 0:
        raise UserError(f"--checkpoint-every is {m}; give minutes >= 0 (0: checkpoint at epoch ends only).")
    return m


def resumed_argv(recipe, args, argv: list[str]) -> tuple[list[str], str]:
    """(the recorded command line of the invocation --resume names, its parent run id); UserError if that
    run is not a raylab invocation or other flags were given beside --resume."""
    from raylab.cli.recipe_flags import recipe_parser
    from raylab.record.tracking import Tracker

    defaults = recipe_parser(recipe).parse_args([])
    extra = sorted(k for k, v in vars(args).items() if k not in RESUME_FLAGS and v != getattr(defaults, k))
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UserError(
            f"--resume runs the recorded command of the run it resumes; drop {flags} "
            "(only --tracking-uri, --experiment, --address and --json go with it)."
        )
    tracker = Tracker(args.tracking_uri or config.default_tracking_uri(), args.experiment)
    parent = tracker.parent_run(args.resume)
    recorded = parent.data.tags.get("raylab.argv")
    if recorded is None:
        raise UserError(
            f"run {parent.info.run_id} has no recorded command (it is not a raylab invocation, or "
            "was made before --resume existed); run the recipe again instead."
        )
    return [*json.loads(recorded), *without_flags(argv, ("--resume",))], parent.info.run_id


def without_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """argv less those flags and their values ('--flag value' and '--flag=value')."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        elif not a.startswith(tuple(f + "=" for f in flags)):
            out.append(a)
    return out
