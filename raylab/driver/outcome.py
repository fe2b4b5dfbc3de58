"""What one child run (a trial, a plain script, a step benchmark) ended as, and the guard that records it.

Whatever happens inside `recorded`, the MLflow run ends: FINISHED, FAILED with the error in a tag
(printed, and the next trial still runs), or KILLED on Ctrl-C / SIGTERM (which goes on up; Ray Train's
own Ctrl-C handler, installed by `fit()`, may exit instead of raising: that counts as an interrupt too).
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from raylab.config import TrialSpec
from raylab.runtime import console
from raylab.record.tracking import Tracker, error_summary

# What ends a run KILLED rather than FAILED: Ctrl-C / SIGTERM, and SystemExit, because Ray Train's own
# Ctrl-C handler, installed by fit(), may sys.exit(0) instead of raising KeyboardInterrupt.
INTERRUPTS = (KeyboardInterrupt, SystemExit)
# Set when the invocation is interrupted: trials running in other threads then end KILLED, not FAILED.
INTERRUPTED = threading.Event()


@dataclass
class TrialOutcome:
    spec: TrialSpec
    run_id: str
    status: str  # FINISHED, FAILED or KILLED
    result: dict = field(default_factory=dict)
    epochs: list = field(default_factory=list)
    error: str | None = None
    ran: str | None = None  # the strategy that actually ran, once rank 0 has said so
    repeat: int = 1  # which of --repeats
    start: dict = field(default_factory=dict)  # {"start": "cold"|"warm", "group_index": n} (raylab/driver/groups.py)

    @property
    def ran_name(self) -> str:
        """The run name: the trial, or e.g. 'tf:mirrored x1 (asked tf:tpu)' after a recorded fallback."""
        if self.ran is None or self.ran == self.spec.short:
            return self.spec.name
        return f"{self.spec.framework}:{self.ran} x{self.spec.workers} (asked {self.spec.kind})"


def error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)).strip()


@contextlib.contextmanager
def recorded(
    outcome: TrialOutcome,
    tracker: Tracker,
    before_end: Callable[[], object] | None = None,
    after_end: Callable[[], object] | None = None,
    log: Path | None = None,
) -> Iterator[TrialOutcome]:
    """The body's outcome: FINISHED if it returns, FAILED (recorded, printed with the trial's log file,
    swallowed) if it raises, KILLED on an interrupt (re-raised); the run is ended either way, between
    `before_end` and `after_end`."""
    try:
        yield outcome
        outcome.status = "FINISHED"
    except INTERRUPTS:
        outcome.status, outcome.error = "KILLED", "interrupted (Ctrl-C or SIGTERM)"
        raise
    except Exception as e:  # noqa: BLE001 - a failed trial is recorded, the next one still runs
        if INTERRUPTED.is_set():
            outcome.status, outcome.error = "KILLED", "interrupted (Ctrl-C or SIGTERM)"
            return
        outcome.status, outcome.error = "FAILED", error_text(e)
        where = f" (log: {log})" if log is not None else ""
        console.get().line(f"[{outcome.spec.name}] FAILED: {error_summary(outcome.error)}{where}", err=True)
    finally:
        try:
            if before_end is not None:
                before_end()
        finally:
            tracker.end(outcome.run_id, outcome.status, outcome.error)
            if after_end is not None:
                after_end()
