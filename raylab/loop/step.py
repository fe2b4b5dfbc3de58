"""The one place a training step is wrapped: its precision context and a profiler.

A backend's step runs its forward pass and loss inside StepContext.forward() (autocast where a lower
precision is applied, else a null context); the loop passes each window's train(k) through
StepContext.window() (a profiler's context where one is asked, else train itself, unchanged).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Callable, ContextManager


@dataclass(frozen=True)
class StepContext:
    precision: str = "fp32"  # what the step applies (recorded as precision_applied)
    autocast: Callable[[], ContextManager] | None = None  # around one step's forward pass and loss
    profile: Callable[[int], ContextManager] | None = None  # around a window, given its steps (a profiler)

    def forward(self) -> ContextManager:
        """The context a step's forward pass and loss run in: autocast where a lower precision is applied."""
        return self.autocast() if self.autocast is not None else contextlib.nullcontext()

    def window(self, train: Callable[[int], object]) -> Callable[[int], object]:
        """train(k), each window inside the profiler's context when one is asked."""
        if self.profile is None:
            return train

        @functools.wraps(train)
        def profiled(k: int):
            with self.profile(k):
                return train(k)

        return profiled
