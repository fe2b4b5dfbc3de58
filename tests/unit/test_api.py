"""The public API: every `__all__` name documented in docs/api.md, moved names that keep working with one
DeprecationWarning naming the new path, and one version in pyproject.toml, raylab and CHANGELOG.md."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import raylab
from raylab import _moved

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = (
    "raylab",
    "raylab.data",
    "raylab.data.stream",
    "raylab.data.scenes",
    "raylab.models",
    "raylab.models.mlp",
    "raylab.models.resunet",
)


def sections(text: str) -> dict[str, str]:
    """docs/api.md's sections by the module their heading names: {"raylab.data": its text}."""
    parts = re.split(r"^#{2,3} `([\w.]+)`\s*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("name", PUBLIC)
def test_every_public_name_is_documented_under_its_module(name):
    module = importlib.import_module(name)
    assert module.__all__, name
    for attr in module.__all__:
        assert hasattr(module, attr) or importlib.util.find_spec(f"{name}.{attr}"), f"{name}.{attr} does not exist"
    section = sections((ROOT / "docs" / "api.md").read_text()).get(name)
    assert section is not None, f"docs/api.md has no section for {name}"
    documented = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
    missing = set(module.__all__) - documented
    assert not missing, f"docs/api.md does not list {sorted(missing)} under {name}"
    assert not documented - set(module.__all__), f"docs/api.md lists names {name}.__all__ lacks"


def test_one_version_everywhere():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    changelog = re.search(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), re.M).group(1)
    assert raylab.__version__ == pyproject == changelog


def test_every_moved_name_points_at_a_module_that_exists():
    for old, new in {**_moved.MOVED, **_moved.MOVED_PACKAGES}.items():
        assert importlib.util.find_spec(new) is not None, (old, new)
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), f"{old} is a file again: drop it from MOVED"
    moved = (ROOT / "docs" / "api.md").read_text().split("## Moved names")[1]
    for old in _moved.MOVED:
        assert f"`{old}`" in moved or f"`{old.rpartition('.')[0]}.*`" in moved, f"docs/api.md does not list {old}"


OLD_RECIPE = """
import numpy as np
from raylab import stream
import raylab.scenes
from raylab import Recipe, main, optimizer

assert stream is __import__("raylab.data.stream").data.stream and raylab.scenes.SIZE == 96

def items(ids, split):
    return {"x": np.ones((len(ids), 4), np.float32), "y": np.zeros(len(ids), np.float32)}

RECIPE = Recipe(name="old", data=stream.generator(items, 64, 16), models={}, loss="mean_squared_error",
                optimizer=optimizer("sgd", 0.1), batch_per_replica=8, epochs=1)
if __name__ == "__main__":
    main(RECIPE)
"""


def test_a_recipe_written_for_the_old_paths_runs_and_warns_once_per_old_name(tmp_path):
    """The script a user runs (Python's default filter shows a DeprecationWarning raised in __main__)."""
    recipe = tmp_path / "old_recipe.py"
    recipe.write_text(OLD_RECIPE)
    out = subprocess.run(
        [sys.executable, str(recipe), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "--trials" in out.stdout
    warnings = re.findall(r"DeprecationWarning: (.*)", out.stderr)
    assert warnings == [
        "raylab.stream moved to raylab.data.stream; import raylab.data.stream instead "
        "(raylab.stream goes in raylab 0.3.0)",
        "raylab.scenes moved to raylab.data.scenes; import raylab.data.scenes instead "
        "(raylab.scenes goes in raylab 0.3.0)",
    ], out.stderr


def test_old_framework_paths_and_python_m_raylab_plain(tmp_path):
    script = (
        "import raylab.backends.torch, raylab.frameworks.torch as t, raylab.loop.worker as w, raylab.driver.protocol "
        "as p; print(raylab.backends.torch.__name__, t.__name__, w.WorkerConfig.__module__, p.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-W", "default::DeprecationWarning", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "raylab.frameworks.torch.worker",
        "raylab.frameworks.torch",
        "raylab.loop.worker_config",
        "raylab.compare.stats",
    ]
    assert "raylab.loop.worker moved to raylab.loop.worker_config" in out.stderr
    assert "raylab.driver.protocol moved to raylab.compare.stats" in out.stderr
    # `python -m raylab.plain SPEC` still runs the plain script (here it reads a spec that is not there).
    out = subprocess.run(
        [sys.executable, "-m", "raylab.plain", str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=120
    )
    assert (
        "DeprecationWarning: python -m raylab.plain is deprecated; run python -m raylab.frameworks.plain" in out.stderr
    )
    assert "frameworks/plain.py" in out.stderr and "FileNotFoundError" in out.stderr, out.stderr


def test_the_new_paths_import_without_a_warning():
    code = (
        "import warnings; warnings.simplefilter('error'); import raylab, raylab.data.stream, raylab.data.scenes, "
        "raylab.models.mlp, raylab.frameworks.plain"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
