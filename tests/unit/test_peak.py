"""`raylab peak`: a framework's product rate measured in a process of its own, kept per host and versions, and a
trial's utilization against it."""

from __future__ import annotations

from raylab.driver import peak


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
    assert peak.utilization("torch", "cpu", fp32, 1, 2, 0.04, peaks) == ({"peak_tflops": 0.08, "utilization": 0.25}, {})
    assert peak.utilization("torch", "cpu", bf16, 1, 1, 0.04, peaks) == ({}, {})  # not measured at bf16
    assert peak.utilization("torch", "cpu", fp32, 1, 1, None, peaks) == ({}, {})  # no count of the work
    # A CPU node of a GPU type is still a CPU trial: no vendor figure for a device it did not use
    assert peak.utilization("torch", "cpu", fp32, 1, 1, 0.04, peaks, ["H100"])[1] == {}


def test_on_a_known_accelerator_the_vendors_dense_peak_for_the_precision_that_ran():
    h200 = {"precision_applied": "bf16", "device_name": "NVIDIA H200"}
    metrics, tags = peak.utilization("torch", "gpu", h200, 1, 2, 98.94, {})
    assert metrics == {"vendor_peak_tflops": 2 * 989.4, "vendor_utilization": 98.94 / (2 * 989.4)}
    assert tags == {"vendor_peak": "H200 SXM bf16 989.4 TFLOP/s a device (vendor, dense)"}
    tf32 = {"precision_applied": "fp32", "float32_matmul": "tf32", "device_name": "NVIDIA H100 PCIe"}
    assert peak.utilization("torch", "gpu", tf32, 1, 1, 37.8, {})[0]["vendor_peak_tflops"] == 378.0
    # torch's name for the SXM part, Ray's node type, a TPU type: each finds its row
    from raylab.record.vendor import known

    assert known("NVIDIA H100 80GB HBM3")[0] == "H100 SXM" and known("A100-80G")[0] == "A100"
    assert known("Tesla T4")[0] == "T4" and known("v4-8")[0] == "TPU v4" and known("TPU-V5LITEPOD")[0] == "TPU v5e"
    assert known("NVIDIA L40S") is None and known("Tesla V100-SXM2-16GB")[0] == "V100 SXM2"
    # bf16 on a T4 has no vendor rate: no figure rather than a wrong one; a TPU found from --tpu-type
    assert peak.utilization("torch", "gpu", {**h200, "device_name": "Tesla T4"}, 1, 1, 1.0, {}) == ({}, {})
    assert peak.utilization("xla", "tpu", {"precision_applied": "bf16"}, 1, 4, 110.0, {}, [None, "v4-8"])[0] == {
        "vendor_peak_tflops": 1100.0, "vendor_utilization": 0.1}
