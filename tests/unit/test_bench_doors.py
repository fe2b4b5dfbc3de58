"""Every script under bench/ (the maintained tools and bench/studies/) still takes the commands its own docstring
shows: each command line, as written there, through the script's argument parser (tests/door.py `parsed`: nothing
after the parser runs). A flag renamed, dropped or given a new meaning breaks this test, not the study someone runs
months later; test_bench_imports.py checks that each script imports, and the pages' bench commands go through
tests/e2e/test_docs_commands.py."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from tests.door import load_module, parsed

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("bench/*.py"), *ROOT.glob("bench/studies/*.py")])
ENDS = {"|", "&&", ";", ">", "2>&1", "&"}  # what ends a command inside a docstring's line


def shown(script: Path) -> list[list[str]]:
    """The arguments of each command the script's docstring shows running it (after its path, to the line's end)."""
    where = str(script.relative_to(ROOT))
    text = re.sub(r"\\\n\s*", " ", ast.get_docstring(ast.parse(script.read_text())) or "")
    out = []
    for line in text.splitlines():
        if where not in line:
            continue
        try:
            words = shlex.split(line[line.index(where) + len(where) :], comments=True)
        except ValueError:  # an unbalanced quote: prose, not a command
            continue
        args = []
        for word in words:
            if word in ENDS:
                break
            args.append(word)
        out.append(args)
    return out


DOORS = [(script, args) for script in SCRIPTS for args in shown(script)]


def test_every_bench_script_shows_a_command():
    missing = [str(s.relative_to(ROOT)) for s in SCRIPTS if not shown(s)]
    assert not missing, f"scripts whose docstring shows no command running them: {missing}"
    assert len(SCRIPTS) >= 20, SCRIPTS


@pytest.mark.parametrize("script, args", DOORS, ids=[f"{s.relative_to(ROOT)} {' '.join(a)}"[:90] for s, a in DOORS])
def test_every_command_a_bench_script_shows_passes_its_parser(script, args, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = load_module(script, f"bench_door_{script.stem}")
    parsed(module.main, args)
