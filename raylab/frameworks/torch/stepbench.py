"""A step benchmark's torch worker (raylab/driver/stepbench.py): threads, seed, device (CUDA with --device gpu)."""

from __future__ import annotations


def env(cfg) -> dict:
    return {}


def set_up(ctx, facts: dict, precision: str, gpu: bool):
    """Threads, seed and device into ctx and facts; no compile metrics (None)."""
    threads_and_seed(ctx, facts)
    if gpu:
        import torch

        ctx.device = torch.device("cuda", 0)  # Ray sets CUDA_VISIBLE_DEVICES to the one it assigned
        ctx.sync = lambda: torch.cuda.synchronize(ctx.device)
        ctx.bf16 = precision == "bf16" and torch.cuda.is_bf16_supported()
        facts["device_name"] = torch.cuda.get_device_name(ctx.device)
    return None


def threads_and_seed(ctx, facts: dict) -> None:
    import torch

    torch.set_num_threads(ctx.threads)
    torch.manual_seed(ctx.seed)
    facts["framework_version"] = torch.__version__
    ctx.device = torch.device("cpu")
