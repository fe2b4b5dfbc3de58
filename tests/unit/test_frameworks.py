"""A framework is one folder: every framework package has the same parts, and the code outside the packages
imports no framework and names no trial kind (it asks a Framework or a Strategy)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from raylab.registry import NAMES, PARTS, Framework, Strategy, framework, frameworks, get_strategy, kinds

RAYLAB = Path(__file__).resolve().parents[2] / "raylab"
# Where a framework may be imported or a kind named: the framework packages, and what a recipe writes
# (the model builders, the recipe's defaults).
ALLOWED = tuple(f"frameworks/{name}/" for name in NAMES) + ("models/", "task/recipe.py")
# Importable names of the frameworks and of what they bring (Keras, tf_keras, torchvision).
FRAMEWORK_MODULES = {fw.package for fw in frameworks()} | {"keras", "tf_keras", "torchvision", "jax", "flax"}


@pytest.mark.parametrize("name", NAMES)
def test_every_framework_has_every_part(name):
    fw = framework(name)
    assert isinstance(fw, Framework) and fw.name == name
    folder = RAYLAB / "frameworks" / name
    assert fw.races() == (name in ("tf", "torch"))  # tf.function and XLA; eager and Inductor; jax, torch_xla: one
    for module, attributes in fw.parts().items():
        assert (folder / f"{module}.py").is_file(), f"raylab/frameworks/{name}/{module}.py is missing"
        part = fw.part(module)
        for attribute in attributes:
            assert hasattr(part, attribute), f"raylab/frameworks/{name}/{module}.py has no {attribute}"
    assert set(fw.part("kinds").KINDS) == set(fw.kinds)
    assert fw.single in fw.kinds
    assert fw.models in NAMES


def test_every_kind_is_its_frameworks_and_says_what_it_supports():
    for kind in kinds():
        strategy = get_strategy(kind)
        assert isinstance(strategy, Strategy) and strategy.kind == kind
        assert strategy.framework == kind.split(":")[0]
        assert strategy.bf16 is None or isinstance(strategy.bf16, str) or callable(strategy.bf16), kind


def test_the_packages_have_the_same_module_names():
    """Beside the parts, a package may hold what only it has (ps.py: its parameter servers): the parts are the
    same everywhere."""
    for name in NAMES:
        modules = {p.stem for p in (RAYLAB / "frameworks" / name).glob("*.py")}
        assert set(PARTS) | {"__init__"} <= modules, name


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def framework_knowledge(path: Path) -> list[str]:
    """What in one module names a framework: an import of it, or a string that is a framework's name, a kind
    ("tf:mwms", "xla:" as a prefix test) or a trial ("tf:mwms x2"). Docstrings and sentences are prose."""
    naming = re.compile(r"^(%s)(:[\w-]*( x\d+)?)?$" % "|".join(NAMES))
    tree = ast.parse(path.read_text())
    docs, found = _docstrings(tree), []
    for node in ast.walk(tree):
        what = []
        if isinstance(node, ast.Import):
            what = [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FRAMEWORK_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in FRAMEWORK_MODULES:
            what = [f"from {node.module} import"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value.strip()
            if naming.match(text) or text.split("/")[0].split(".")[0] in FRAMEWORK_MODULES:
                what = [repr(text)]
        found += [f"{path}:{node.lineno}: {w}" for w in what]
    return found


def test_the_finder_sees_an_import_a_kind_and_a_prefix_test(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""tf:mwms in prose is fine."""\nimport torch\nfrom keras import ops\n'
        'K = "tf:mwms x2"\nif k.startswith("xla:"):\n    pass\nhelp = "e.g. tf:none,torch:ddp"\n'
        'where = "tensorflow/python/distribute"\n'
    )
    found = [f.split(": ", 1)[1] for f in framework_knowledge(module)]
    assert sorted(found) == sorted(
        ["import torch", "from keras import", "'tf:mwms x2'", "'xla:'", "'tensorflow/python/distribute'"]
    )


def test_outside_the_framework_packages_no_module_imports_a_framework_or_names_a_kind():
    found = []
    for path in sorted(RAYLAB.rglob("*.py")):
        where = path.relative_to(RAYLAB).as_posix()
        if where.startswith(ALLOWED) or where == "registry.py":  # the registry names the packages
            continue
        found += framework_knowledge(path)
    assert found == []
