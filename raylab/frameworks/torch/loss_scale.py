"""fp16's dynamic loss scale in torch:none and torch:ddp: torch.amp.GradScaler, without a host read per step.

GradScaler.step reads found_inf back to the host (`.item()`) to decide whether to call optimizer.step, unless
the optimizer takes the decision itself (`_step_supports_amp_scaling`: the fused Adam, AdamW and SGD, which
raylab builds under fp16). Then the scale, the decision and the count of skipped steps stay on the device, and
the loop's one read per window is the only read; where the optimizer cannot (a recipe's own), each step's read
is counted in host_syncs.

Under DDP the gradients are all-reduced inside backward(), before the check: every replica sees the same sums,
so a non-finite gradient on one replica is non-finite on all of them, and all skip the same step.
"""

from __future__ import annotations


class LossScale:
    def __init__(self, optimizer, device):
        import torch

        self.optimizer, self.scaler = optimizer, torch.amp.GradScaler(device.type)
        self.on_device = bool(getattr(optimizer, "_step_supports_amp_scaling", False))
        self.skipped = torch.zeros((), device=device)  # steps whose gradients were not finite
        self.reads = 0  # GradScaler's own reads (one per step where the optimizer cannot decide on the device)

    def backward(self, loss) -> None:
        self.scaler.scale(loss).backward()

    def step(self) -> None:
        """The optimizer's step where the gradients are finite, then the scale's update (halved after a
        non-finite step, doubled after growth_interval finite ones)."""
        self.scaler.step(self.optimizer)
        if not self.on_device:
            self.reads += 1
        # the check's results, per device, until update() clears them (GradScaler keeps them there)
        self.skipped += sum(self.scaler._found_inf_per_device(self.optimizer).values())
        self.scaler.update()

    def figures(self) -> dict:
        """Read at the end: the final loss scale and how many steps were skipped."""
        return {"loss_scale": float(self.scaler.get_scale()), "skipped_steps": int(self.skipped.item())}

    def state_dict(self) -> dict:
        return {"scaler": self.scaler.state_dict(), "skipped": float(self.skipped.item())}

    def load_state_dict(self, state: dict) -> None:
        self.scaler.load_state_dict(state["scaler"])
        self.skipped.fill_(state["skipped"])
