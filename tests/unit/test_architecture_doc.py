"""docs/architecture.md stays true to the code: every file, folder, module symbol and class member it names in
backticks exists (`trainer.py`, `loop/`, `data.put_dataset`, `frameworks/torch/worker.py shard_batches`,
`StepContext.forward()`, `raylab.cli.recipe_main`)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RAYLAB = ROOT / "raylab"
DOC = ROOT / "docs" / "architecture.md"
IDENT = r"[A-Za-z_]\w*"


@functools.cache
def sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text()) for p in RAYLAB.rglob("*.py")}


def module_names(tree: ast.Module) -> set[str]:
    """What a module defines at its top: functions, classes, assignments, imports."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def class_members(name: str) -> set[str] | None:
    """Every member of the classes named `name` in raylab (None: no such class)."""
    found = None
    for tree in sources().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == name:
                found = found or set()
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        found.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        found.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        found |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                    for sub in ast.walk(item):  # self.x = ... in its methods
                        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                            found.add(sub.attr)
    return found


def files_named(path: str) -> list[Path]:
    """The files or folders a doc path means: from the repository's root, from raylab/, or ending raylab's path."""
    path = path.rstrip("/")
    direct = [p for p in (ROOT / path, RAYLAB / path) if p.exists()]
    return direct or [p for p in RAYLAB.rglob("*") if p.as_posix().endswith("/" + path)]


def modules_named(name: str) -> list[Path]:
    """raylab's modules whose dotted name ends with `name` ("data" -> raylab/data/__init__.py, "loop" ...)."""
    out = []
    for p in sources():
        dotted = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if dotted == name or dotted.endswith("." + name):
            out.append(p)
    return out


def wrong(token: str) -> str | None:
    """Why a backticked token names something that is not there, or None (found, or not a name of the code)."""
    token = re.sub(r"\(.*\)$", "", token.strip())
    if m := re.fullmatch(r"([\w/]+\.py)(?: (" + IDENT + r"))?", token):
        files = files_named(m.group(1))
        if not files:
            return "no such file"
        if m.group(2) and not any(m.group(2) in module_names(sources()[f]) for f in files if f in sources()):
            return f"{m.group(1)} defines no {m.group(2)}"
        return None
    if re.fullmatch(r"[\w/]+/", token) and "/" in token:
        return None if files_named(token) else "no such folder"
    if m := re.fullmatch(r"(raylab(?:\.\w+)*)\.(" + IDENT + ")", token):
        modules = modules_named(m.group(1))
        if modules:
            return None if any(m.group(2) in module_names(sources()[p]) for p in modules) else "not defined there"
        return None if modules_named(f"{m.group(1)}.{m.group(2)}") else "no such module"
    if m := re.fullmatch(r"(" + IDENT + r")\.(" + IDENT + ")", token):
        head, attr = m.groups()
        members = class_members(head) if head[0].isupper() else None
        if members is not None:
            return None if attr in members else f"{head} has no {attr}"
        modules = modules_named(head)
        if modules and not head[0].isupper():
            return None if any(attr in module_names(sources()[p]) for p in modules) else f"{head} defines no {attr}"
    return None


def test_the_checker_sees_what_is_gone():
    assert wrong("data.worker_shard") == "data defines no worker_shard"
    assert wrong("StepContext.window()") == "StepContext has no window"
    assert wrong("backends/tf_worker.py") == "no such file"
    assert wrong("frameworks/torch/worker.py shard_batches") is None
    assert wrong("frameworks/torch/worker.py take_nothing") == "frameworks/torch/worker.py defines no take_nothing"
    assert wrong("StepContext.forward()") is None and wrong("data.put_dataset") is None
    assert wrong("raylab.cli.recipe_main") is None and wrong("loop/") is None


def test_every_name_in_the_architecture_doc_exists():
    tokens = re.findall(r"`([^`\n]+)`", DOC.read_text())
    gone = {t: why for t in dict.fromkeys(tokens) if (why := wrong(t))}
    assert gone == {}
