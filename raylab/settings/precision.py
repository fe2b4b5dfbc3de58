"""What each trial kind applies for --precision, decided before Ray starts.

    fp32  everywhere.
    bf16  torch:none and torch:ddp: `torch.autocast` (CPU and CUDA) around the forward pass; the loss and
          metrics are computed on float32 outputs. tf:none, tf:mirrored, tf:mwms, tf:tpu: the Keras policy
          `mixed_bfloat16` (bfloat16 compute, float32 variables); the loss and metrics on float32 outputs.
          xla:* on a TPU: `torch.autocast("xla")` (torch_xla 2.9's autocast is TPU-only).
    fp16  torch:none and torch:ddp: `torch.autocast(device, float16)` and a dynamic loss scale
          (torch.amp.GradScaler); tf:none, tf:mirrored, tf:mwms: the Keras policy `mixed_float16` and a
          LossScaleOptimizer whose finite check agrees across replicas (raylab/frameworks/tf/loss_scale.py).
          CPUs emulate float16 (slowly); TPUs have no float16 arithmetic (bf16 there).

Each trial kind says what it meets (`Strategy.bf16`, `Strategy.fp16` in raylab/frameworks/<name>/kinds.py). A trial
that cannot apply what was asked stops the command before Ray starts with one line, unless
--precision-fallback fp32 was given: then it runs fp32 and records precision_applied=fp32 with the reason
(precision_fallback_reason), and the command says so (raylab/settings/resolve.py decides it, with a trial's other
settings).
"""

from __future__ import annotations

from raylab.registry import get_strategy


def why_not(kind: str, precision: str, device: str) -> str | None:
    """Why `kind` cannot apply `precision` on `device` ("cpu", "gpu", or "tpu": the kind's own device), or None."""
    if precision == "fp32":
        return None
    return get_strategy(kind).why_not(precision, device)
