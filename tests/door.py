"""raylab's door, for tests: what a command line passes before Ray starts, run without starting Ray.

- `at_the_door(argv)`: a recipe's command line (`RECIPE.py FLAGS...`) through the recipe's parser, the checked
  configuration, its trials resolved, and the data with its task checked (raylab/cli/run.py `_at_the_door`, less the
  connection).
- `parsed(call, argv)`: any other command's own argparse parser (`raylab compare`, a bench script), stopped once
  it has parsed; a parser error fails with argparse's own message.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from pathlib import Path


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def at_the_door(argv: list[str]):
    """The checks a recipe's command line passes before Ray starts; returns the checked configuration."""
    from raylab.cli.configure import edited, make_config
    from raylab.cli.recipe_flags import recipe_parser
    from raylab.cli.run import load_data

    recipe = load_module(Path(argv[0]), f"door_{Path(argv[0]).stem}").RECIPE
    args = recipe_parser(recipe).parse_args(argv[1:])
    recipe = edited(recipe, args)
    cfg = make_config(recipe, args)
    load_data(recipe, cfg)
    return cfg


class _Parsed(Exception):
    pass


def parsed(call, argv: list[str]) -> argparse.Namespace:
    """What the first argparse parser `call()` parses from `argv` (as sys.argv[1:]); nothing after it runs."""
    real = argparse.ArgumentParser.parse_args

    def stop(self, args=None, namespace=None):
        raise _Parsed(real(self, args, namespace))

    argparse.ArgumentParser.parse_args = stop
    saved, sys.argv = sys.argv, ["door", *argv]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            call()
    except _Parsed as done:
        return done.args[0]
    except SystemExit as e:
        raise AssertionError(f"the parser refused {argv}: exit {e.code}") from None
    finally:
        argparse.ArgumentParser.parse_args = real
        sys.argv = saved
    raise AssertionError(f"{call} returned without parsing {argv}")
