"""A torch trial's state as its worker keeps it: checkpointed in torch's own format (`torch_saver`), summed to compare
replicas (`param_checksum`). The xla and parameter-server loops share both."""

from __future__ import annotations


def torch_saver(module, optimizer, scheduler, device=None, scale=None):
    """Checkpoints in torch's own format (torch.save of state dicts): model, optimizer, learning-rate schedule,
    fp16's loss scale and the RNG (dropout); rank 0 writes, every rank loads it (all replicas hold the same
    state)."""
    import torch

    from raylab.loop.checkpoint import Saver

    def save(directory: str, rank: int) -> None:
        if rank == 0:
            torch.save(
                {
                    "model": module.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict() if scheduler is not None else None,
                    "scale": scale.state_dict() if scale is not None else None,
                    "rng": torch.get_rng_state(),
                },
                f"{directory}/torch.pt",
            )

    def load(directory: str) -> None:
        state = torch.load(f"{directory}/torch.pt", map_location=device or "cpu", weights_only=False)
        module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(state["scheduler"])
        if scale is not None:
            scale.load_state_dict(state["scale"])
        torch.set_rng_state(state["rng"].cpu())

    return Saver(save, load)


def param_checksum(module) -> float:
    """Sum of |parameters and buffers|: equal on every replica that holds the same model."""
    return float(
        sum(
            t.detach().cpu().double().abs().sum()
            for t in [*module.parameters(), *module.buffers()]
            if t.is_floating_point()
        )
    )
