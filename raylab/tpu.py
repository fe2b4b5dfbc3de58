"""Where the TPUs of a Ray cluster are, and what a TPU trial's workers ask Ray for (driver side).

Ray detects TPU VMs itself: every TPU host advertises `TPU: <chips>`, and the first host of a
pod slice also `TPU-<type>-head: 1` (e.g. `TPU-v4-8-head`). A `tf:tpu` trial's one worker
reserves all the chips of one host (TPUStrategy drives every core of its host from one
process); with `--tpu-type` it asks for that slice's head resource, so it lands on the slice's
first host. `xla:*` trials on TPU run one process per chip (the PyTorch/XLA way), so each of
their workers reserves one chip. Nothing here imports TensorFlow or torch.
"""

from __future__ import annotations

import re

from raylab.errors import UserError

TYPE_PATTERN = re.compile(r"^v\d+[a-z]*-\d+$")  # v2-8, v4-16, v5litepod-8, v6e-8
TOPOLOGY_PATTERN = re.compile(r"^\d+(x\d+){1,2}$")  # 2x2x1, 4x4


def head_resource(tpu_type: str) -> str:
    return f"TPU-{tpu_type}-head"


def parse_tpu_type(text: str | None) -> str | None:
    if text is None:
        return None
    if not TYPE_PATTERN.match(text):
        raise UserError(
            f"--tpu-type '{text}' is not a TPU accelerator type; use the form Ray labels TPU slices "
            "with, e.g. v4-8 or v5litepod-16."
        )
    return text


def parse_topology(text: str | None) -> str | None:
    if text is not None and not TOPOLOGY_PATTERN.match(text):
        raise UserError(f"--tpu-topology '{text}' is not a TPU topology; use the slice's chip grid, e.g. 2x2x1.")
    return text


def accelerator_type(tpu_type: str) -> str:
    """Ray's accelerator type of a TPU slice type: v4-8 -> TPU-V4, v5litepod-16 -> TPU-V5LITEPOD."""
    return f"TPU-{tpu_type.split('-')[0].upper()}"


def slice_scaling(tpu_type: str | None, topology: str | None, workers: int) -> dict:
    """ScalingConfig arguments for TPU workers: Ray reserves a whole slice when there is more than one worker."""
    if workers == 1:
        return {"use_tpu": True}
    if not (tpu_type and topology):
        raise UserError(
            f"{workers} TPU workers need the slice they run on: pass --tpu-type (e.g. v4-8) and "
            "--tpu-topology (e.g. 2x2x1), or run on one worker."
        )
    return {"use_tpu": True, "topology": topology, "accelerator_type": accelerator_type(tpu_type)}


def describe(cluster: dict) -> str:
    """The cluster's schedulable resources, short: 'CPU=2, GPU=1'."""
    shown = {
        k: v
        for k, v in cluster.items()
        if not k.startswith("node:") and k not in ("memory", "object_store_memory") and "accelerator_type" not in k
    }
    return ", ".join(f"{k}={v:g}" for k, v in sorted(shown.items())) or "nothing schedulable"


def missing_tpu(tpu_type: str | None, cluster: dict) -> str | None:
    """Why this cluster cannot host a TPU trial, or None when it can."""
    if cluster.get("TPU", 0) < 1:
        return f"no TPU in the Ray cluster (it has {describe(cluster)})"
    if tpu_type and cluster.get(head_resource(tpu_type), 0) < 1:
        return f"no {tpu_type} TPU slice in the Ray cluster (no {head_resource(tpu_type)} resource)"
    return None


def chips_per_host() -> int:
    """TPU chips on one TPU host of the connected cluster (the largest host), 0 if there is none."""
    import ray

    return int(max((n["Resources"].get("TPU", 0) for n in ray.nodes() if n.get("Alive")), default=0))


def host_resources(tpu_type: str | None, cluster: dict) -> dict:
    """Per-worker Ray resources of a trial that takes a whole TPU host: {} when there is no TPU to take."""
    if missing_tpu(tpu_type, cluster):
        return {}
    return {"TPU": chips_per_host(), **({head_resource(tpu_type): 1} if tpu_type else {})}
