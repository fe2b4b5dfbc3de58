"""The shape of the code: no import circle between raylab's modules, no function a reader gets lost in."""

from __future__ import annotations

import ast
from pathlib import Path

RAYLAB = Path(__file__).resolve().parents[2] / "raylab"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 350  # a module that grows past it splits where its concepts part (420 before the house was sorted)


def modules() -> dict[str, Path]:
    out = {}
    for path in RAYLAB.rglob("*.py"):
        name = ".".join(path.relative_to(RAYLAB.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The raylab modules `name` imports, at its top or inside a function (`from pkg import mod` names mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            subs = {f"{module}.{a.name}" for a in node.names} & known.keys()
            found |= subs if len(subs) == len(node.names) else subs | {module}
    return {m for m in found if m in known and m != name}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


def test_no_long_functions_or_modules():
    long = []
    for path in sorted(RAYLAB.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(RAYLAB)}:{node.name}: {lines} lines")
    assert long == []


MAX_IMPORT_LEVELS = 14  # the longest import chain from raylab's top (13 when the frameworks became folders; 18 before)


def import_levels(graph: dict[str, set[str]]) -> tuple[int, list[str]]:
    """The longest chain of imports, in modules (a module importing nothing is one level), and that chain."""
    longest: dict[str, list[str]] = {}

    def chain(name: str) -> list[str]:
        if name not in longest:
            below = [chain(m) for m in graph[name]]
            longest[name] = [name] + max(below, key=len, default=[])
        return longest[name]

    top = max((chain(name) for name in graph), key=len)
    return len(top), top


def test_the_level_counter_counts_the_longest_chain():
    assert import_levels({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"c"}}) == (3, ["a", "b", "c"])


def test_the_imports_stack_few_levels():
    known = modules()
    levels, chain = import_levels({name: imports(name, path, known) for name, path in known.items()})
    assert levels <= MAX_IMPORT_LEVELS, " -> ".join(chain)


PRIVATE_RAY = (
    "ray._private",
    "ray._raylet",
    "ray.train._internal",
    "ray.train.v2._internal",
    "ray.data._internal",
    "ray.util.state",
)


def private_ray_uses(text: str) -> list[int]:
    """Lines of a module that import or reach into Ray's private API (an import, or an attribute path)."""
    return [
        i
        for i, line in enumerate(text.splitlines(), 1)
        if not line.lstrip().startswith("#") and any(p in line for p in PRIVATE_RAY)
    ]


def test_the_private_ray_finder_finds_an_import_and_an_attribute_path():
    assert private_ray_uses("import ray\nfrom ray._private import worker\nx = ray._private.worker._global_node\n") == [
        2,
        3,
    ]


def test_rays_private_api_is_used_in_one_module_only():
    """raylab/_ray.py is the one place a Ray upgrade can break raylab's reach into Ray's internals."""
    root = RAYLAB.parent
    found = [
        f"{p.relative_to(root)}:{n}"
        for folder in ("raylab", "bench", "recipes")
        for p in (root / folder).rglob("*.py")
        if p != RAYLAB / "_ray.py"
        for n in private_ray_uses(p.read_text())
    ]
    assert found == []
