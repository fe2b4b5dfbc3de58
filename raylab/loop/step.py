"""The one place a training step is wrapped: its precision context and a profiler.

A backend's step runs its forward pass and loss inside StepContext.forward() (autocast where a lower
precision is applied, else a null context). With --profile, `profile` is the framework's profiler
(raylab/loop/profile.py): the loop runs one steady window of rank 0 inside it; every other window, and every
window without --profile, is train(k) as it is.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, ContextManager


@dataclass(frozen=True)
class StepContext:
    precision: str = "fp32"  # what the step applies (recorded as precision_applied)
    autocast: Callable[[], ContextManager] | None = None  # around one step's forward pass and loss
    # The framework's profiler around one window: profile(logdir, captured) (raylab/loop/profile.py); None: not asked.
    profile: Callable[..., ContextManager] | None = None

    def forward(self) -> ContextManager:
        """The context a step's forward pass and loss run in: autocast where a lower precision is applied."""
        return self.autocast() if self.autocast is not None else contextlib.nullcontext()
