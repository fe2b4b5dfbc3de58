"""One host identity for every answer raylab keeps (the floor, the peaks, --compile best's races), and the key a
race's answer is kept under: it changes with raylab, the framework's compilers and runtimes, and the model's source
wherever the builder imports it from."""

from __future__ import annotations

import importlib
import sys
import textwrap
from types import SimpleNamespace

import numpy as np

import raylab
from raylab.probes import fingerprint, floor, host, peak, race
from raylab.registry import framework


def test_every_kept_answer_is_valid_for_one_identity_with_raylab_and_the_runtimes():
    assert floor.identity() == peak.identity() == host.identity()
    mine = host.identity([framework("torch")])
    assert mine["raylab"].startswith(raylab.__version__ + "+") and "cpu_model" in mine
    assert {"torch", "triton", "nvidia-cudnn-cu12"} <= set(mine) and "tensorflow" not in mine
    assert {"keras", "jaxlib"} <= set(host.identity())


def test_raylabs_source_is_part_of_its_identity(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(host, "RAYLAB", tmp_path)
    before = host.raylab_source.__wrapped__()
    (tmp_path / "a.py").write_text("x = 2\n")  # a checkout's change, the version unchanged
    assert host.raylab_source.__wrapped__() != before


def write_models(root, width: int):
    (root / "mymodels").mkdir(exist_ok=True)
    (root / "mymodels" / "__init__.py").write_text("")
    (root / "mymodels" / "net.py").write_text(f"WIDTH = {width}\n")
    (root / "mymodels" / "build.py").write_text(
        textwrap.dedent("""
        import json


        def torch_model(task):
            from .net import WIDTH  # imported inside the builder, from a module of the user's own

            return json.dumps(WIDTH)
        """)
    )


def test_a_kept_race_answer_changes_with_raylab_and_with_a_model_module_the_builder_imports(tmp_path, monkeypatch):
    import ray

    write_models(tmp_path, 64)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    build = importlib.import_module("mymodels.build")
    monkeypatch.setattr(
        ray,
        "nodes",
        lambda: [{"Alive": True, "NodeManagerHostname": "h", "Resources": {"CPU": 2.0, "accelerator_type:H200": 1.0}}],
    )
    recipe = SimpleNamespace(
        models={"torch": build.torch_model},
        loss="ce",
        optimizer="adam",
        schedule=None,
        metrics=("accuracy",),
        preprocess=None,
    )
    cfg = SimpleNamespace(device="cpu", threads=1)

    def key():
        return race.cache_key(recipe, cfg, ("torch", 32, "fp32", None), ["eager", "inductor"], np.zeros((4, 784)))

    try:
        first = key()
        assert key() == first
        write_models(tmp_path, 128)  # the architecture changed where the builder imports it from
        assert key() != first
        second = key()
        versions = host.version
        monkeypatch.setattr(host, "version", lambda name: "9.9.9" if name == "raylab" else versions(name))
        assert key() != second
    finally:
        for name in ("mymodels.build", "mymodels"):
            sys.modules.pop(name, None)


def test_the_model_source_is_read_without_importing_what_it_names(tmp_path, monkeypatch):
    """`from pkg.mod import Name` and a framework's import are followed on sys.path without running any module (a
    module that would raise at import is never imported); a namespace package's modules and a builder in a
    package's __init__.py with relative imports are followed too."""
    (tmp_path / "ns" / "deep").mkdir(parents=True)  # no __init__.py: a namespace package
    (tmp_path / "ns" / "deep" / "layers.py").write_text("raise RuntimeError('imported')\nWIDTH = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        "def torch_model(task):\n    from .net import Net\n    from ns.deep.layers import WIDTH\n    import torch\n"
        "    return Net(WIDTH)\n"
    )
    (tmp_path / "pkg" / "net.py").write_text("class Net:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    pkg = importlib.import_module("pkg")
    try:
        before = set(sys.modules)
        first = fingerprint.model_source(pkg.torch_model)
        assert set(sys.modules) - before == set()  # nothing imported: not ns.deep.layers, not torch
        (tmp_path / "ns" / "deep" / "layers.py").write_text("raise RuntimeError('imported')\nWIDTH = 2\n")
        second = fingerprint.model_source(pkg.torch_model)
        (tmp_path / "pkg" / "net.py").write_text("class Net:\n    width = 3\n")
        assert len({first, second, fingerprint.model_source(pkg.torch_model)}) == 3
    finally:
        sys.modules.pop("pkg", None)
