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
    assert peak.utilization("torch", "cpu", "fp32", 1, 2, 0.04, peaks) == {"peak_tflops": 0.08, "utilization": 0.25}
    assert peak.utilization("torch", "cpu", "bf16", 1, 1, 0.04, peaks) == {}  # not measured at bf16
    assert peak.utilization("torch", "cpu", "fp32", 1, 1, None, peaks) == {}  # no count of the work
