"""Vendors' dense peak rates for the accelerators raylab's docs name, in TFLOP/s per device (one GPU, one TPU
chip), without structured sparsity. A trial on one of them records `vendor_peak_tflops` (its precision's rate times
its replicas) and `vendor_utilization` (its `achieved_tflops` over that), beside `utilization`, which is against
the rate `raylab peak` measured on the machine itself (raylab/probes/peak.py).

Which device a trial ran on is what its worker found (the `device_name` tag: torch's, TF's and jax's name for the
GPU, a Cloud TPU VM's type under torch_xla), else the accelerator type asked for or of the nodes its workers ran
on, else the TPU type asked for (--tpu-type v4-8). The
rate follows the precision applied: fp32 matrix products at full precision use the fp32 rate, TF32 products
(`float32_matmul` tf32) the TF32 tensor-core rate, bf16 and fp16 theirs; a rate the vendor does not give (bf16 on a
T4 or V100, fp32 on a TPU) leaves the trial without a vendor figure.

Sources (checked 2026-11-28; the sparse figures on the data sheets are twice these):
  NVIDIA H100 and H200 Tensor Core GPU data sheets (nvidia.com/en-us/data-center/h100, /h200): SXM FP32 67,
  TF32 494.7, BF16 and FP16 989.4; H100 PCIe FP32 51.2, TF32 378, BF16 and FP16 756; H100 NVL and H200 NVL FP32
  60, TF32 417.5, BF16 and FP16 835.5 (the sheets' 835 and 1,671 are with sparsity).
  NVIDIA A100 data sheet (nvidia.com/en-us/data-center/a100): FP32 19.5, TF32 156, BF16 and FP16 312 (SXM and
  PCIe alike). NVIDIA V100 data sheet: SXM2 FP32 15.7, FP16 tensor 125; PCIe FP32 14, FP16 tensor 112. NVIDIA T4
  data sheet: FP32 8.1, FP16 65. NVIDIA L4 data sheet: FP32 30.3, TF32 60, BF16 and FP16 121.
  Google Cloud TPU system architecture pages (cloud.google.com/tpu/docs/v2 ... /v6e), peak bf16 per chip:
  v2 45, v3 123, v4 275, v5e 197, v5p 459, v6e (Trillium) 918. jax names them "TPU v4", "TPU v5 lite" (v5e),
  "TPU v5" (v5p), "TPU v6 lite" (v6e); Ray's node types "TPU-V4", "TPU-V5LITEPOD", "TPU-V5P", "TPU-V6E".

Ray's GPU node types ("H100", "H200", "V100") do not say the form factor: a trial known only by one is given the
SXM row, and its tag says that the form factor was not known.
"""

from __future__ import annotations

import re

_H100 = {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}
# (a pattern matched against the device's name, node type or TPU type, case-insensitive; its name; TFLOP/s by rate),
# the more specific first (an H100 PCIe before any H100)
_NVL = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}
PEAKS = [
    (r"h100.*pcie", "H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    (r"h100.*nvl", "H100 NVL", _NVL),
    (r"h200.*nvl", "H200 NVL", _NVL),
    (r"gh200", "GH200", _H100),  # the Grace Hopper superchip's GPU: the H100 SXM's rates (its data sheet)
    (r"h200", "H200 SXM", _H100),
    (r"h100", "H100 SXM", _H100),
    (r"a100", "A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (r"v100.*pcie", "V100 PCIe", {"fp32": 14.0, "fp16": 112.0}),
    (r"v100", "V100 SXM2", {"fp32": 15.7, "fp16": 125.0}),
    (r"(^|\W)t4($|\W)", "T4", {"fp32": 8.1, "fp16": 65.0}),
    (r"(^|\W)l4($|\W)", "L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    # a TPU type (v4-8) or Ray's accelerator type for the host (TPU-V4, TPU-V5LITEPOD, TPU-V6E)
    (r"(^|\W)v2(\W|$)", "TPU v2", {"bf16": 45.0}),
    (r"(^|\W)v3(\W|$)", "TPU v3", {"bf16": 123.0}),
    (r"(^|\W)v4(\W|$)", "TPU v4", {"bf16": 275.0}),
    (r"(^|\W)v5(e|litepod|\s*lite)(\W|$)", "TPU v5e", {"bf16": 197.0}),
    (r"(^|\W)v5p(\W|$)|^tpu v5$", "TPU v5p", {"bf16": 459.0}),
    (r"(^|\W)v6(e|\s*lite)(\W|$)", "TPU v6e", {"bf16": 918.0}),
]


def known(name: str | None) -> tuple[str, dict] | None:
    """(the vendor's name for it, its rates) of a device name, node type or TPU type; None for one not in PEAKS."""
    if not name:
        return None
    return next(((label, rates) for pattern, label, rates in PEAKS if re.search(pattern, name.strip().lower())), None)


def rate_of(precision: str | None, float32_matmul: str | None) -> str:
    """Which of the vendor's rates a trial's products ran at."""
    if precision in ("bf16", "fp16"):
        return precision
    return "tf32" if float32_matmul == "tf32" else "fp32"


def vendor_utilization(
    device: str,
    names: list[str | None],
    precision: str | None,
    float32_matmul: str | None,
    replicas: int,
    achieved_tflops: float | None,
) -> tuple[dict, dict]:
    """(metrics, tags) of a trial on an accelerator (device "gpu" or "tpu") the table knows: vendor_peak_tflops and
    vendor_utilization, with the tag vendor_peak naming the device and rate; ({}, {}) on a CPU, on an unknown
    device, without a count of the work, or where the vendor gives no rate for its precision."""
    if device not in ("gpu", "tpu") or achieved_tflops is None:
        return {}, {}
    found = next((k for k in map(known, names) if k is not None), None)
    rate = rate_of(precision, float32_matmul)
    if found is None or rate not in found[1]:
        return {}, {}
    label, rates = found
    named = next(n for n in names if known(n) is not None)
    guessed = re.fullmatch(r"h\d00|v100", named.strip().lower()) is not None  # Ray's type: no form factor
    peak = rates[rate] * max(replicas, 1)
    return (
        {"vendor_peak_tflops": peak, "vendor_utilization": achieved_tflops / peak},
        {
            "vendor_peak": f"{label} {rate} {rates[rate]:g} TFLOP/s a device (vendor, dense)"
            + (f"; node type {named} does not say the form factor: the SXM figures" if guessed else "")
        },
    )
