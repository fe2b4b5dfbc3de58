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
import importlib.util
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


def _installed(origin: str | None) -> bool:
    """The standard library's, an installed package's, or built in: not the user's code."""
    if not origin or origin in ("built-in", "frozen"):
        return True
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return "site-packages" in origin or "dist-packages" in origin or any(origin.startswith(r) for r in roots)


def _imports(path: Path, package: str | None) -> list[str]:
    """The modules a file imports anywhere in it (functions' own imports too), relative ones resolved."""
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
            names += [f"{base}.{a.name}" for a in node.names]  # `from pkg import module`
    return names


def _find(name: str) -> tuple[Path, str] | None:
    """(file, its package) of a module that is the user's code, found without importing it (its parent packages
    are imported only where the top-level package is the user's too)."""
    try:
        top = importlib.util.find_spec(name.split(".")[0])
        if top is None or _installed(top.origin):
            return None
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or _installed(spec.origin) or not spec.origin.endswith(".py"):
        return None
    if Path(spec.origin).resolve().is_relative_to(RAYLAB):
        return None  # raylab's own code is in identity()
    package = name if spec.submodule_search_locations is not None else name.rpartition(".")[0]
    return Path(spec.origin), package


def model_source(builder) -> str:
    """A hash of the builder's file and of the user's modules it imports, followed through theirs."""
    import inspect

    try:
        start = Path(inspect.getsourcefile(builder))
    except (TypeError, OSError):
        return hashlib.sha256(repr(builder).encode()).hexdigest()
    module = getattr(builder, "__module__", None) or ""
    seen: dict[Path, None] = {}
    todo = [(start.resolve(), module.rpartition(".")[0] if module else None)]
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        for name in _imports(path, package):
            found = _find(name)
            if found is not None and found[0].resolve() not in seen:
                todo.append((found[0].resolve(), found[1]))
    digest = hashlib.sha256()
    for path in sorted(seen):
        digest.update(path.read_bytes())
    return digest.hexdigest()
