"""A trial's share of the peaks: its `achieved_tflops` over the rate `raylab peak` measured on the host it ran on
(raylab/probes/peak.py: read only where every worker ran on the host that measured it) and over the vendor's dense
rate for its device (raylab/record/vendor.py), the device named by its worker (`device_name`), else the
accelerator type asked for or those of the nodes its workers ran on, else the TPU type.
"""

from __future__ import annotations


def key(name: str, device: str, precision: str, threads: int) -> str:
    """A measured peak's key in `raylab peak`'s cache."""
    return f"{name}/{device}/{precision}/{threads}"


def worker_nodes(tags: dict) -> tuple[list[str], bool]:
    """(the accelerator types of the nodes the trial's workers ran on (its `worker_node_ids` tag), whether every
    one is on this host: the one `raylab peak` measured), from Ray's view of the cluster."""
    import ray

    from raylab.record.prices import ACCELERATOR

    ids = [i for i in (tags.get("worker_node_ids") or "").split(",") if i]
    here = ray.util.get_node_ip_address()
    nodes = [n for n in ray.nodes() if any(n.get("NodeID", "").startswith(i) for i in ids)]
    types = sorted({r[len(ACCELERATOR) :] for n in nodes for r in n.get("Resources", {}) if r.startswith(ACCELERATOR)})
    return types, bool(nodes) and all(n.get("NodeManagerAddress") == here for n in nodes)


def utilization(
    name: str,
    device: str,
    tags: dict,
    threads: int,
    replicas: int,
    achieved_tflops: float | None,
    peaks: dict,
    names: list[str | None] = (),
) -> tuple[dict, dict]:
    """(metrics, tags) of a trial's share of the peaks: {"peak_tflops", "utilization"} where its peak was measured
    on its host (`peaks`: {} where it ran elsewhere), and, on an accelerator the vendors' table knows (`names`: its
    device's name, node type, TPU type),
    {"vendor_peak_tflops", "vendor_utilization"} (raylab/record/vendor.py). tags: the trial's own (the precision
    and the float32 matmul it applied, its device's name)."""
    from raylab.record.vendor import vendor_utilization

    precision = tags.get("precision_applied") or "fp32"
    metrics, said = vendor_utilization(
        device, [tags.get("device_name"), *names], precision, tags.get("float32_matmul"), replicas, achieved_tflops
    )
    peak = peaks.get(key(name, device, precision, threads), {}).get("tflops")
    if peak and achieved_tflops is not None:
        metrics.update({"peak_tflops": peak, "utilization": achieved_tflops / (peak * max(replicas, 1))})
    return metrics, said
