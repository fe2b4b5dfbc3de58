"""cluster.yaml and cluster-local.yaml pass Ray's own cluster-launcher validation, offline; broken copies fail."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray._private.accelerators.tpu import TPUAcceleratorManager
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[2]


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def check(config: dict) -> dict:
    """What `ray up` does with a config before touching any cloud: fill defaults, then validate."""
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    return prepared


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster-local.yaml"])
def test_cluster_configs_pass_ray_validation(name):
    prepared = check(load(name))
    assert prepared["head_node_type"] in prepared["available_node_types"]
    commands = "\n".join(prepared["setup_commands"])
    # Every node gets raylab[all] (every framework) with CI's exact constraints, and the Fashion-MNIST package.
    assert "-c ~/raylab/constraints.txt -e ~/raylab'[all]'" in commands and "dataset-fashion-mnist" in commands
    head = "\n".join(prepared["head_start_ray_commands"])
    assert "ray start --head" in head
    assert "mlflow server --host 127.0.0.1" in head  # the tracking server listens on loopback only
    # Token authentication on every node (`ray start` alone leaves it off), with the one token shipped to each.
    starts = prepared["head_start_ray_commands"] + prepared["worker_start_ray_commands"]
    assert all("RAY_AUTH_MODE=token" in c for c in starts if "ray start" in c)
    assert prepared["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


def test_gcp_config_has_cpu_head_and_gpu_and_tpu_workers():
    types = load("cluster.yaml")["available_node_types"]
    head = types[load("cluster.yaml")["head_node_type"]]
    assert "GPU" not in head["resources"] and "acceleratorType" not in head["node_config"]
    assert any(t["resources"].get("GPU") and t["node_config"].get("guestAccelerators") for t in types.values())
    tpus = [t for t in types.values() if "acceleratorType" in t["node_config"]]
    assert tpus
    for t in tpus:  # the check Ray's GCP provider applies to TPU node configs
        assert TPUAcceleratorManager.is_valid_tpu_accelerator_type(t["node_config"]["acceleratorType"])
        setup = "\n".join(t["worker_setup_commands"])  # replaces setup_commands on this type: must repeat them
        # The TPU stack as pyproject.toml's tpu extra (in place of all), not pins swapped after the install.
        assert "-c ~/raylab/constraints.txt -e ~/raylab'[tpu]'" in setup and "dataset-fashion-mnist" in setup
        assert "uninstall" not in setup and "tensorflow-tpu" not in setup
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "tensorflow-tpu==2.20.0" in extras["tpu"] and "torch-xla[tpu]==2.9.0" in extras["tpu"]
    assert not any(r.startswith(("tensorflow==", "tf-keras")) for r in extras["tpu"])  # both install `tensorflow`


@pytest.mark.parametrize("breakage", ["unknown_key", "node_type_without_resources", "worker_count_not_a_number"])
def test_broken_copies_fail_validation(breakage):
    config = load("cluster.yaml")
    if breakage == "unknown_key":
        config["available_node_types"]["tpu_worker"]["setup"] = ["oops"]
    elif breakage == "node_type_without_resources":
        del config["available_node_types"]["gpu_worker"]["resources"]
    else:
        config["available_node_types"]["gpu_worker"]["max_workers"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        check(config)


def test_local_config_without_head_ip_fails():
    config = load("cluster-local.yaml")
    del config["provider"]["head_ip"]
    with pytest.raises(Exception, match="head_ip"):
        check(config)
