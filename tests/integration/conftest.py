"""A real local Ray cluster (2 CPUs, like the machines this runs on), shared by the integration tests."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import kill_orphaned_workers, raylet_pids

ROOT = Path(__file__).resolve().parents[2]


def load_recipe(name: str):
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


@pytest.fixture(scope="package")
def ray_cluster():
    """HOME and the auth token are set by tests/conftest.py (shared with the multi-node cluster)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    raylets = raylet_pids([ray._private.worker._global_node])
    yield ray
    ray.shutdown()
    kill_orphaned_workers(raylets)


def recipe_runner(tmp_path, monkeypatch):
    """Runs a recipe through its real command line on the connected cluster; returns (exit code, summary, client)."""
    from mlflow.tracking import MlflowClient

    from raylab.cli import recipe_main

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"

    def run(recipe, *args):
        out = tmp_path / "summary.json"
        code = recipe_main(recipe, ["--tracking-uri", uri, "--json", str(out), *args])
        summary = json.loads(out.read_text()) if out.exists() else None
        return code, summary, MlflowClient(tracking_uri=uri)

    return run


@pytest.fixture
def run_recipe(ray_cluster, tmp_path, monkeypatch):
    return recipe_runner(tmp_path, monkeypatch)
