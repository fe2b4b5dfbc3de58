"""Parameter-server logic that needs no cluster: roles, sharding, layouts, CPU shares."""

from __future__ import annotations

from raylab.driver.resources import reservation
from raylab.frameworks.tf.kinds import ps_roles
from raylab.frameworks.torch.ps_server import shard_parameters
from raylab.registry import get_strategy


def test_tf_ps_roles_one_cluster_dict_and_a_task_per_rank():
    cluster, tasks = ps_roles(["a:1", "b:2", "c:3", "d:4", "e:5"], ps=2)
    assert cluster == {"chief": ["a:1"], "ps": ["b:2", "c:3"], "worker": ["d:4", "e:5"]}
    assert tasks == [("chief", 0), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]


def test_parameters_are_sharded_by_size_and_every_one_exactly_once():
    sizes = [100352, 128, 1280, 10]  # the fashion MLP: W1, b1, W2, b2
    assert shard_parameters(sizes, 1) == [[0, 1, 2, 3]]
    two = shard_parameters(sizes, 2)
    assert two == [[0], [1, 2, 3]]
    three = shard_parameters(sizes, 3)
    assert sorted(i for s in three for i in s) == [0, 1, 2, 3] and all(three)


def test_ps_layouts_count_every_process():
    assert get_strategy("tf:ps").layout(2, 1, ps=1).ray_workers == 4  # chief + ps + 2 workers
    assert get_strategy("torch:ps-sync").layout(2, 1, ps=2).ray_workers == 4  # 2 hosts + 2 workers
    assert get_strategy("torch:ps-async").layout(3, 1, ps=1).replicas == 3
    assert get_strategy("torch:ddp").layout(2, 1, ps=3).ray_workers == 2  # --ps means nothing to DDP


def test_oversubscribed_ps_trials_share_the_cpus_and_others_do_not():
    ps = get_strategy("torch:ps-sync")
    assert reservation(ps, ps.layout(2, 1, ps=1), {"CPU": 2.0}) == (0.66, True)
    assert reservation(ps, ps.layout(2, 1, ps=1), {"CPU": 8.0}) == (1, False)
    assert reservation(ps, ps.layout(4, 2, ps=1), {"CPU": 6.0}) == (1, True)
    ddp = get_strategy("torch:ddp")
    assert reservation(ddp, ddp.layout(4, 1), {"CPU": 2.0}) == (1, False)  # check_resources refuses this one
