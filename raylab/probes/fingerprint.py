"""The fingerprint of a recipe's model: what --compile best's kept answer for a model is valid for, beside the host
(raylab/probes/host.py identity()).

`model_source(builder)` is the source of a model builder's file and of every module it imports that is not the
standard library's or an installed package's, followed through their imports (a recipe whose builder imports its
model from a module of its own, as raylab/models/resunet.py does from resunet_torch.py, changes its fingerprint when
that module changes; raylab's own modules are in identity()). It is read without importing the framework: the
source, not the built model. The whole key of a kept race: raylab/probes/race_key.py.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import sys
import sysconfig
from pathlib import Path

RAYLAB = Path(__file__).resolve().parents[1]  # raylab's own modules: in the host's identity, not here


def _installed(where: str | None) -> bool:
    """The standard library's, an installed package's, or built in: not the user's code."""
    if not where or where in ("built-in", "frozen"):
        return True
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return "site-packages" in where or "dist-packages" in where or any(where.startswith(r) for r in roots)


def _imports(path: Path, package: str | None) -> list[str]:
    """The modules a file imports anywhere in it (functions' own imports too), relative ones resolved; for
    `from X import N`, X and X.N (N may be a submodule; _find tells)."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = (package or "").split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1]) if node.level <= len(parts) else ""
                base = f"{parent}.{base}".strip(".") if parent else ""
                if not base:
                    continue
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]
    return names


def _find(name: str) -> tuple[Path, str] | None:
    """(file, its package) of a module that is the user's code, found on sys.path without importing anything
    (importlib's PathFinder, one dotted part at a time: find_spec would import the parent packages, the frameworks
    among them); None for raylab's own (in identity()), an installed module, a name that is no module (an
    attribute of `from X import N`), or one not found."""
    parts = name.split(".")
    if parts[0] == "raylab":
        return None
    loaded = sys.modules.get(name)  # already imported from where sys.path does not reach (a recipe's folder)
    if getattr(loaded, "__file__", None) and loaded.__file__.endswith(".py") and not _installed(loaded.__file__):
        return Path(loaded.__file__), name if hasattr(loaded, "__path__") else name.rpartition(".")[0]
    try:
        top = importlib.machinery.PathFinder.find_spec(parts[0])
    except Exception:  # noqa: BLE001 - a fingerprint reads what it can; nothing here may stop a run
        return None
    if top is None:
        return None
    origin, locations = top.origin, list(top.submodule_search_locations or [])
    for part in parts[1:]:  # by hand: PathFinder asks for the parent package's module in a nested namespace
        if _installed(origin or (locations[0] if locations else None)) or not locations:
            return None  # installed, or the last part was a module and this one an attribute of it
        origin, locations = _locate(part, locations)
        if origin is None and not locations:
            return None
    if _installed(origin or (locations[0] if locations else None)) or not origin or not origin.endswith(".py"):
        return None  # installed, or a namespace package: its modules are found by their own names
    return Path(origin), name if locations else name.rpartition(".")[0]


def _locate(part: str, locations: list[str]) -> tuple[str | None, list[str]]:
    """(file, search locations) of submodule `part` of a package searched at `locations`: a package's __init__.py
    and its folder, a module's file and none, a namespace package's folder alone; (None, []) where there is none."""
    for where in map(Path, locations):
        if (where / part / "__init__.py").is_file():
            return str(where / part / "__init__.py"), [str(where / part)]
        if (where / f"{part}.py").is_file():
            return str(where / f"{part}.py"), []
    folders = [str(where / part) for where in map(Path, locations) if (where / part).is_dir()]
    return None, folders


def model_source(builder) -> str:
    """A hash of the builder's file and of the user's modules it imports, followed through theirs."""
    import inspect

    try:
        start = Path(inspect.getsourcefile(builder))
    except (TypeError, OSError):
        return hashlib.sha256(repr(builder).encode()).hexdigest()
    module = getattr(builder, "__module__", None) or ""
    is_package = hasattr(sys.modules.get(module), "__path__")  # a builder in a package's __init__.py
    seen: dict[Path, None] = {}
    todo = [(start.resolve(), module if is_package else (module.rpartition(".")[0] if module else None))]
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        for name in _imports(path, package):
            found = _find(name)
            if found is not None and found[0].resolve() not in seen:
                todo.append((found[0].resolve(), found[1]))
    digest = hashlib.sha256(repr(builder).encode() if not start.exists() else b"")
    for path in sorted(seen):
        try:
            digest.update(path.read_bytes())
        except OSError:  # a source that is not a file (a notebook's cell): its name stands for it
            digest.update(str(path).encode())
    return digest.hexdigest()
