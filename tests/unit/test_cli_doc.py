"""docs/cli.md is what the commands' --help print today (scripts/cli_reference.py writes it), and the help texts
name every framework where they speak of all of them."""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def reference_module():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_cli_md_matches_help():
    ref = reference_module()
    page = (ROOT / "docs" / "cli.md").read_text()
    now = ref.reference()
    diff = "".join(difflib.unified_diff(page.splitlines(True), now.splitlines(True), "docs/cli.md", "--help", n=1))
    assert page == now, (
        f"docs/cli.md is out of date; run .venv/bin/python scripts/cli_reference.py > docs/cli.md\n{diff}"
    )
    for _, typed, _ in ref._commands():  # every command has its section, with what it printed
        section = page.split(f"$ {typed}\n", 1)
        assert len(section) == 2 and section[1].startswith("usage:"), typed


def test_raylab_help_goes_to_stdout_and_a_wrong_command_to_stderr(capsys):
    from raylab.cli import main

    assert main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: raylab compare") and not err
    assert main(["comapre"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("usage: raylab compare") and not out


def test_batch_max_help_names_every_kind_that_searches():
    from raylab.registry import get_strategy, kinds

    page = re.sub(r"\s+", " ", (ROOT / "docs" / "cli.md").read_text())
    searchable = [k for k in sorted(kinds()) if get_strategy(k).batch_search]
    assert {k.split(":")[0] for k in searchable} >= {"tf", "torch", "jax"}
    assert f"'max': before each trial of {', '.join(searchable)}," in page
