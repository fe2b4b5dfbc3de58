"""A worker's training loop, in parts: the state it keeps (state.py), where its batches come from
(batches.py), what wraps a step (step.py), checkpoints (checkpoint.py), what rank 0 reports
(report.py), and the loop that joins them (run.py)."""

from raylab.loop.batches import Batches, BatchSource, StreamBatches
from raylab.loop.checkpoint import Handoff, Saver, announce_report, join_reports
from raylab.loop.report import builtins_only
from raylab.loop.epochs import Training, combined, run_epochs
from raylab.loop.state import LoopState, windows
from raylab.loop.step import StepContext

__all__ = [
    "BatchSource",
    "Batches",
    "Handoff",
    "LoopState",
    "Saver",
    "StepContext",
    "StreamBatches",
    "Training",
    "builtins_only",
    "combined",
    "run_epochs",
    "windows",
]
