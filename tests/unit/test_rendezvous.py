"""The one way a trial's coordinator or master address is picked (raylab/frameworks/rendezvous.py), without
starting workers."""

from __future__ import annotations

from raylab.frameworks import rendezvous


def test_every_coordinator_address_is_picked_one_way():
    """rendezvous.address is the pick Ray Train makes for torch's process group, on the node that listens;
    jax's coordinator is rank 0's, TF's servers each worker's own."""

    class Group:
        def execute_single(self, rank, fn):
            return f"rank{rank}:{fn.__name__}"

        def execute(self, fn):
            return [f"rank{i}:{fn.__name__}" for i in range(2)]

    assert rendezvous.rank0_address(Group()) == "rank0:address"
    assert rendezvous.every_address(Group()) == ["rank0:address", "rank1:address"]
    host, _, port = rendezvous.address().rpartition(":")
    assert host and int(port) > 0
