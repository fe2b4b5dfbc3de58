"""What an answer raylab keeps on this host is valid for: one identity for every cache (the start-up floor, the
measured peaks, --compile best's races), and the fingerprint of a recipe's model for the races.

`identity()` is the host (its name, CPUs and CPU model), Python, raylab (its version and a hash of its own source,
so that a checkout's change to how a step runs is a new raylab), Ray, and each framework's package with the
compilers and runtimes it declares (`Framework.runtimes`: Triton, cuDNN, CUDA's runtime, Keras, jaxlib, libtpu...,
as installed). A kept answer whose identity differs is not read.

`model_source(builder)` is the source of a model builder's file and of every module it imports that is not the
standard library's or an installed package's, followed through their imports (a recipe whose builder imports its
model from a module of its own, as raylab/models/resunet.py does from resunet_torch.py, changes its fingerprint when
that module changes; raylab's own modules are in identity()). It is read without importing the framework: the
source, not the built model.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import os
import socket
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from raylab.registry import Framework, frameworks

RAYLAB = Path(__file__).resolve().parents[1]


def version(name: str) -> str | None:
    try:
        return metadata.version(name)  # names are normalized: a module's name finds its distribution
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def raylab_source() -> str:
    """A hash of raylab's own .py files: what a version number misses in a checkout."""
    digest = hashlib.sha256()
    for path in sorted(RAYLAB.rglob("*.py")):
        digest.update(str(path.relative_to(RAYLAB)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def identity(of: list[Framework] | None = None) -> dict:
    """This host and the versions that set what is measured on it (every framework's, or those of `of`)."""
    from raylab.loop.worker_config import cpu_model

    packages = dict.fromkeys(p for fw in (of if of is not None else frameworks()) for p in (fw.package, *fw.runtimes))
    return {"host": socket.gethostname(), "cpus": os.cpu_count(), "cpu_model": cpu_model(),
            "python": sys.version.split()[0], "raylab": f"{version('raylab')}+{raylab_source()}", "ray": version("ray"),
            **{name: version(name) for name in packages}}


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
                parent = ".".join(parts[:len(parts) - node.level + 1]) if node.level <= len(parts) else ""
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
