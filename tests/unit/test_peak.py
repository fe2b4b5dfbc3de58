"""`raylab peak`: a framework's product rate measured in a process of its own, kept per host and versions, and a
trial's utilization against it (raylab/probes/utilization.py) and against its device's vendor rate."""

from __future__ import annotations

from raylab.probes import peak
from raylab.probes.utilization import utilization, worker_nodes


def test_a_probe_measures_a_rate_and_the_cache_keeps_it_for_this_host(tmp_path):
    found = peak.probe("torch", "fp32", "cpu", 1, 64, 0.2)
    assert found["tflops"] > 0 and found["best_tflops"] >= found["tflops"] and found["windows"] >= 3, found
    path = tmp_path / "peak.json"
    peak.save({peak.key("torch", "cpu", "fp32", 1): found}, path)
    peak.save({peak.key("jax", "cpu", "fp32", 1): {"tflops": 0.05}}, path)  # a second figure joins the first
    assert set(peak.load(path)) == {"torch/cpu/fp32/1", "jax/cpu/fp32/1"}
    assert "error" in peak.probe("torch", "fp8", "cpu", 1, 64, 0.1)  # no such precision: said, not raised


def test_a_trials_utilization_is_its_achieved_rate_over_its_replicas_peaks():
    peaks = {"torch/cpu/fp32/1": {"tflops": 0.08}}
    fp32, bf16 = {"precision_applied": "fp32"}, {"precision_applied": "bf16"}
    assert utilization("torch", "cpu", fp32, 1, 2, 0.04, peaks) == ({"peak_tflops": 0.08, "utilization": 0.25}, {})
    assert utilization("torch", "cpu", bf16, 1, 1, 0.04, peaks) == ({}, {})  # not measured at bf16
    assert utilization("torch", "cpu", fp32, 1, 1, None, peaks) == ({}, {})  # no count of the work
    # A CPU node of a GPU type is still a CPU trial: no vendor figure for a device it did not use
    assert utilization("torch", "cpu", fp32, 1, 1, 0.04, peaks, ["H100"])[1] == {}


def test_on_a_known_accelerator_the_vendors_dense_peak_for_the_precision_that_ran():
    h200 = {"precision_applied": "bf16", "device_name": "NVIDIA H200"}
    metrics, tags = utilization("torch", "gpu", h200, 1, 2, 98.94, {})
    assert metrics == {"vendor_peak_tflops": 2 * 989.4, "vendor_utilization": 98.94 / (2 * 989.4)}
    assert tags == {"vendor_peak": "H200 SXM bf16 989.4 TFLOP/s a device (vendor, dense)"}
    tf32 = {"precision_applied": "fp32", "float32_matmul": "tf32", "device_name": "NVIDIA H100 PCIe"}
    assert utilization("torch", "gpu", tf32, 1, 1, 37.8, {})[0]["vendor_peak_tflops"] == 378.0
    # torch's name for the SXM part, Ray's node type, a TPU type: each finds its row
    from raylab.record.vendor import known

    assert known("NVIDIA H100 80GB HBM3")[0] == "H100 SXM" and known("A100-80G")[0] == "A100"
    assert known("Tesla T4")[0] == "T4" and known("v4-8")[0] == "TPU v4" and known("TPU-V5LITEPOD")[0] == "TPU v5e"
    assert known("NVIDIA L40S") is None and known("Tesla V100-SXM2-16GB")[0] == "V100 SXM2"
    # bf16 on a T4 has no vendor rate: no figure rather than a wrong one; a TPU found from --tpu-type
    assert utilization("torch", "gpu", {**h200, "device_name": "Tesla T4"}, 1, 1, 1.0, {}) == ({}, {})
    assert utilization("xla", "tpu", {"precision_applied": "bf16"}, 1, 4, 110.0, {}, [None, "v4-8"])[0] == {
        "vendor_peak_tflops": 1100.0,
        "vendor_utilization": 0.1,
    }


def test_every_frameworks_device_finds_its_row_nvl_pcie_and_tpu_lite_apart():
    """torch's and TF's name for an NVL or PCIe part, jax's for a TPU "lite", Ray's node types: each its own row;
    a node type that does not say the form factor gets the SXM row, and the tag says so."""
    from raylab.record.vendor import known

    assert [
        known(n)[0]
        for n in (
            "NVIDIA H100 NVL",
            "NVIDIA H200 NVL",
            "Tesla V100-PCIE-32GB",
            "TPU v5 lite",
            "TPU v6 lite",
            "TPU v5",
            "TPU-V5P",
            "v5litepod-8",
        )
    ] == ["H100 NVL", "H200 NVL", "V100 PCIe", "TPU v5e", "TPU v6e", "TPU v5p", "TPU v5p", "TPU v5e"]
    bf16 = {"precision_applied": "bf16"}
    metrics, tags = utilization("tf", "gpu", {**bf16, "device_name": "NVIDIA H200 NVL"}, 1, 1, 83.55, {})
    assert metrics["vendor_peak_tflops"] == 835.5 and "form factor" not in tags["vendor_peak"]
    metrics, tags = utilization("xla", "gpu", bf16, 1, 1, 98.94, {}, [None, "H200"])  # the node's type alone
    assert metrics["vendor_utilization"] == 0.1
    assert tags["vendor_peak"].endswith("; node type H200 does not say the form factor: the SXM figures")


def test_a_peak_measured_here_is_read_only_for_trials_whose_workers_ran_here(monkeypatch):
    import ray

    nodes = [
        {"NodeID": "aaaa" * 14, "NodeManagerAddress": "10.0.0.1", "Resources": {"CPU": 8.0}},
        {
            "NodeID": "bbbb" * 14,
            "NodeManagerAddress": "10.0.0.2",
            "Resources": {"GPU": 1.0, "accelerator_type:H100": 1.0},
        },
    ]
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "10.0.0.1")
    assert worker_nodes({"worker_node_ids": "aaaaaaaaaaaa"}) == ([], True)
    assert worker_nodes({"worker_node_ids": "aaaaaaaaaaaa,bbbbbbbbbbbb"}) == (["H100"], False)
    assert worker_nodes({}) == ([], False)
