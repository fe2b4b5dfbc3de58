"""A simulated multi-node Ray cluster on this machine: three raylets, one CPU each, one of them a "TPU host", and
two node types (Ray's accelerator_type:T4 and accelerator_type:TPU-V4 resources) for the hardware axis.

`ray.cluster_utils.Cluster` starts real raylets (separate processes, separate object stores)
against one GCS, so workers on different nodes talk over the network stack and get their data
through Ray's object transfer, as on a real cluster. The third node advertises the resources a
v4-8 TPU VM gives Ray (`TPU: 4`, `TPU-v4-8-head: 1`) without having a TPU: scheduling is real,
the TPU is not, which is what the tf:tpu error and fallback paths need.
"""

from __future__ import annotations

import pytest

from tests.conftest import kill_orphaned_workers, raylet_pids
from tests.integration.conftest import ROOT, load_recipe, recipe_runner  # noqa: F401 - load_recipe re-exported

TPU_HOST = {"TPU": 4, "TPU-v4-8-head": 1, "accelerator_type:TPU-V4": 1}  # as Ray labels a v4 host
T4_HOST = {"accelerator_type:T4": 1}  # a second node type (its GPU not simulated: trials there use its CPU)


@pytest.fixture(scope="package")
def cluster():
    """HOME and the auth token are set by tests/conftest.py (shared with the integration cluster)."""
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    nodes = {
        "head": c.head_node,
        "cpu": c.add_node(num_cpus=1, resources=T4_HOST),
        "tpu": c.add_node(num_cpus=1, resources=TPU_HOST),
    }
    raylets = raylet_pids(nodes.values())
    try:
        c.wait_for_nodes(timeout=120)
        ray.init(address=c.address, logging_level="WARNING")
        yield c, {name: node.node_id for name, node in nodes.items()}
    finally:
        ray.shutdown()
        c.shutdown()
        kill_orphaned_workers(raylets)


@pytest.fixture
def run_recipe(cluster, tmp_path, template_db):
    return recipe_runner(tmp_path, template_db)
