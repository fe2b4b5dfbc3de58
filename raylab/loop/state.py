"""Where a worker's loop is: the windows of an epoch and the state a checkpoint keeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


def windows(steps_per_epoch: int, window: int, warmup: int, done: int = 0) -> list[int]:
    """One epoch's windows (steps between host reads). The trial's first step is a window of its own
    (tracing, compiling) and the warm-up ends on a window's edge, so steady windows hold no warm-up step;
    a window never crosses an epoch's end."""
    out: list[int] = []
    i = 0
    while i < steps_per_epoch:
        k = min(window, steps_per_epoch - i)
        if done == 0:
            k = 1
        elif done < warmup:
            k = min(k, warmup - done)
        out.append(k)
        i, done = i + k, done + k
    return out


@dataclass
class LoopState:
    """The loop's position and running figures: saved beside every checkpoint (as JSON, raylab.json) and
    restored from it, so a restarted worker goes on exactly where the checkpoint was taken."""

    epoch: int = 0  # epochs finished
    step: int = 0  # steps into the next epoch when the checkpoint was taken inside it, else 0
    sums: list[float] | float = 0.0  # that epoch's window sums so far (0.0: none yet)
    epoch_s: float = 0.0  # that epoch's training seconds so far
    done: int = 0  # training steps of the whole trial
    reads: int = 0  # the loop's own host reads (one per window)
    host_syncs: int = 0  # every device-to-host read in training windows, where the framework counts them
    epochs: list[dict] = field(default_factory=list)  # each finished epoch's fields, resent after a restart
    checkpoints: int = 0  # checkpoints taken (a restart from one counts it)
    checkpoint_s: float = 0.0  # seconds spent taking them
    interval: int | None = None  # steps between checkpoints inside an epoch, once calibrated

    def epoch_sums(self) -> np.ndarray | float:
        """The sums the next epoch starts from: the saved ones when the checkpoint was inside it."""
        return np.asarray(self.sums, dtype=np.float64) if self.step else 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, saved: dict) -> LoopState:
        return cls(**saved)
