"""Writes docs/cli.md, the command-line reference, from the commands' own `--help` (one source: the parsers).

    .venv/bin/python scripts/cli_reference.py > docs/cli.md

tests/unit/test_cli_doc.py fails when docs/cli.md differs from what this prints: change a flag's help in
raylab/cli/ (or the parser that owns it), then run this again.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = "110"  # the width argparse wraps to, fixed so the page does not depend on the terminal

INTRO = """# Command-line reference

Generated from the commands' own `--help` by `scripts/cli_reference.py` (`.venv/bin/python
scripts/cli_reference.py > docs/cli.md`); `tests/unit/test_cli_doc.py` fails when this page and `--help` differ.

Every training recipe has the same command line; its defaults (trials, workers, batch, epochs, the
`--quick` subset) are the recipe's own, shown here for `recipes/fashion.py`. A step benchmark
(`raylab.StepBench`, e.g. `recipes/conv_bench.py`) has a shorter one. The `raylab` command compares, uploads,
measures the start-up floor and the matrix-product peak, and exports data.
"""


def _recipe(path: str):
    spec = importlib.util.spec_from_file_location(f"raylab_cli_reference_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(
        v for k, v in vars(module).items() if k.isupper() and hasattr(v, "builders" if "bench" in path else "epochs")
    )


def _commands() -> list[tuple[str, str, callable]]:
    """(heading, the command as typed, a function that runs it with --help)."""
    from raylab.cli import bench_main, main, recipe_main

    return [
        (
            "A recipe",
            "python recipes/fashion.py --help",
            lambda: recipe_main(_recipe("recipes/fashion.py"), ["--help"]),
        ),
        (
            "A step benchmark",
            "python recipes/conv_bench.py --help",
            lambda: bench_main(_recipe("recipes/conv_bench.py"), ["--help"]),
        ),
        ("raylab", "raylab --help", lambda: main(["--help"])),
        ("raylab compare", "raylab compare --help", lambda: main(["compare", "--help"])),
        ("raylab upload", "raylab upload --help", lambda: main(["upload", "--help"])),
        ("raylab floor", "raylab floor --help", lambda: main(["floor", "--help"])),
        ("raylab peak", "raylab peak --help", lambda: main(["peak", "--help"])),
        ("raylab data export", "raylab data export --help", lambda: main(["data", "export", "--help"])),
        ("raylab probes", "raylab probes --help", lambda: main(["probes", "--help"])),
    ]


def help_text(run) -> str:
    """What `run` prints (its --help), at a fixed width."""
    out = io.StringIO()
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            run()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    return out.getvalue().rstrip() + "\n"


def reference() -> str:
    parts = [INTRO]
    for heading, typed, run in _commands():
        parts.append(f"## {heading}\n\n```text\n$ {typed}\n{help_text(run)}```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference())
