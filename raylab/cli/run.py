"""A recipe's own command line, run: validate everything, then Ray, then the trials, then compare."""

from __future__ import annotations

import json
import sys

from raylab import config
from raylab.cli.configure import edited, make_config, resumed_argv, without_flags
from raylab.cli.recipe_flags import recipe_parser
from raylab.settings import resolve
from raylab.errors import UserError


def recipe_main(recipe, argv: list[str] | None = None) -> int:
    """Runs a recipe's trial matrix: validate everything, then Ray, then the trials, then compare."""
    from raylab.cli.session import stoppable

    argv = list(sys.argv[1:] if argv is None else argv)
    args = recipe_parser(recipe).parse_args(argv)
    return stoppable(lambda: _run(recipe, args, argv))


def _run(recipe, args, argv: list[str]) -> int:
    from raylab.cli.session import run_to_end
    from raylab.runtime import console

    console.install(console.Console(verbose=args.verbose, name=args.experiment)).quiet_libraries()
    try:
        argv, recipe, cfg, ds, tracker = _at_the_door(recipe, args, argv)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    _announce(recipe, cfg, ds)
    from raylab.driver import invocation

    # The command as given (less --resume and where-to-look flags): what --resume runs again.
    recorded = json.dumps(
        without_flags(
            [a for a in argv if a != "--verbose"], ("--resume", "--tracking-uri", "--experiment", "--json", "--address")
        )
    )
    return run_to_end(
        cfg, tracker, lambda tags: invocation.run_recipe(recipe, cfg, ds, tracker, {**tags, "raylab.argv": recorded})
    )


def _at_the_door(recipe, args, argv: list[str]):
    """(argv, edited recipe, config, data, tracker): the recorded command if --resume, every check before Ray."""
    from raylab.cli.session import connect

    resume = None
    if args.resume:
        argv, resume = resumed_argv(recipe, args, argv)
        args = recipe_parser(recipe).parse_args(argv)
        args.resume = resume
    recipe = edited(recipe, args)
    cfg = make_config(recipe, args)
    cfg.resume = resume
    ds = load_data(recipe, cfg)
    return argv, recipe, cfg, ds, connect(cfg, args.address)


def _announce(recipe, cfg: config.Settings, ds) -> None:
    for note in cfg.notes + ([ds.note] if ds.note else []):
        print(f"raylab: note: {note}")
    items = f"{ds.train_items} train / {ds.test_items} test items" if ds.train_items is not None else "items counted"
    if ds.streamed and cfg.quick:
        items += f", --quick reads the first {recipe.quick_train} / {recipe.quick_test}"
    print(
        f"raylab: {recipe.name} on {ds.name} ({items}{', streamed' if ds.streamed else ''} from "
        f"{ds.source}); trials: {', '.join(s.name for s in cfg.trials)}",
        flush=True,
    )


def load_data(recipe, cfg: config.Settings):
    """The recipe's data, checked, its task checked against it, and what the trials run with on it resolved
    (settings.resolve.check): UserErrors before Ray starts."""
    from raylab.data import as_dataset
    from raylab.task import check

    ds = as_dataset(recipe.data, recipe.name)
    check(recipe.task(ds.target_names), ds.target_names, None if ds.streamed else ds.input_dtypes)
    resolve.check(cfg, ds.streamed)
    if ds.streamed:
        return ds  # --quick limits it when Ray Data opens it (raylab/driver/invocation.py)
    return ds.subset(recipe.quick_train, recipe.quick_test) if cfg.quick else ds
