"""Every script under bench/ (the maintained tools and bench/studies/) still imports: a module that moved, a name that
went or a path a script builds from its own place breaks this test, not a benchmark someone runs months later.
Read from the sources: each `import raylab.X` and `from raylab.X import name`, at any depth of the script, including
the recipes its f-strings write (read as code where they parse); and every script imported as a module (its
`__main__` body not run) in one child process."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from tests.unit.test_architecture_doc import module_names

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "bench").rglob("*.py"))


def defined(module: str) -> set[str] | None:
    """What a raylab module defines or imports at its top, read from its source; None: no such module. A package
    offers its submodules too."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    names = module_names(ast.parse(Path(spec.origin).read_text()))
    if spec.submodule_search_locations:
        for where in spec.submodule_search_locations:
            names |= {p.stem for p in Path(where).glob("*.py")} | {p.name for p in Path(where).iterdir() if p.is_dir()}
    return names


def raylab_imports(tree: ast.AST) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) for each import of raylab in a parsed script."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "raylab":
            out += [(node.module, a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.split(".")[0] == "raylab"]
    return out


def embedded_code(tree: ast.AST) -> list[ast.AST]:
    """The recipes a script writes out as text (strings that parse as code and import raylab)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "raylab" in node.value:
            try:
                found.append(ast.parse(node.value))
            except SyntaxError:
                pass
    return found


def missing(script: Path) -> list[str]:
    tree = ast.parse(script.read_text())
    out = []
    for part in [tree, *embedded_code(tree)]:
        for module, name, line in raylab_imports(part):
            names = defined(module)
            if names is None:
                out.append(f"{script.name}:{line}: no module {module}")  # gone, or moved (a MOVED name has no file)
            elif name is not None and name != "*" and name not in names:
                out.append(f"{script.name}:{line}: {module} has no {name}")
    return out


def test_the_check_finds_a_moved_module_and_a_name_that_went(tmp_path):
    script = tmp_path / "old.py"
    script.write_text("from raylab.driver.stats import parity\nfrom raylab.compare.stats import no_such\n")
    assert missing(script) == [
        "old.py:1: no module raylab.driver.stats",
        "old.py:2: raylab.compare.stats has no no_such",
    ]


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(p.relative_to(ROOT / "bench")) for p in SCRIPTS])
def test_every_bench_script_finds_what_it_imports_of_raylab(script):
    assert missing(script) == []


def test_every_bench_script_imports_as_a_module():
    """Each script loaded under a name of its own, as `python bench/...` would before its main body: the top of the
    script runs (its ROOT, what it puts on sys.path, its module-level imports), nothing else."""
    import subprocess
    import sys

    code = (
        "import importlib.util, sys, traceback\n"
        "bad = []\n"
        "for i, path in enumerate(sys.argv[1:]):\n"
        "    spec = importlib.util.spec_from_file_location(f'bench_script_{i}', path)\n"
        "    try:\n"
        "        spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "    except BaseException:\n"
        "        bad.append(path + ': ' + traceback.format_exc(limit=2).splitlines()[-1])\n"
        "print('\\n'.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, SCRIPTS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT / "bench",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ""
