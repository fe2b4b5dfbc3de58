"""Where a trial's processes meet: the one way raylab picks an address for a framework's coordinator, server or process
group's master. On the worker that will listen: its node's IP as Ray knows it and a free port there, from Ray Train's
own `get_address_and_port`, the pick Ray Train's TorchConfig makes for torch's process group (MASTER_ADDR, MASTER_PORT:
torch:ddp, and xla:ddp's gloo group, raylab/frameworks/torch/process_group.py). TF's backend asks every worker for one
(each runs a gRPC server: TF_CONFIG, raylab/frameworks/tf/kinds.py), jax's asks rank 0 for its coordinator
(`jax.distributed.initialize`, raylab/frameworks/jax/kinds.py). Run in the worker, through the worker group.
"""

from __future__ import annotations


def address() -> str:
    """HOST:PORT ([HOST]:PORT for IPv6) of a free port on this node, for one process of this node to listen on."""
    from raylab._ray import get_address_and_port

    host, port = get_address_and_port()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def rank0_address(worker_group) -> str:
    """The address rank 0's process listens on (a coordinator, a master), picked on rank 0's node."""
    return worker_group.execute_single(0, address)


def every_address(worker_group) -> list[str]:
    """An address for each worker to listen on, in rank order, each picked on its own node."""
    return worker_group.execute(address)
