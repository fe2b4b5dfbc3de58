"""The Ray Train controller's side of failure handling: `Policy` decides whether a failed worker group restarts
(raylab/failure.py says what failed), `StartGuard` ends a group whose start failed half-way."""

from __future__ import annotations

import time

from raylab._ray import ControllerCallback, DefaultFailurePolicy, FailureDecision, WorkerGroupCallback
from raylab.failure import abort_cause, code_failures, describe, lost_processes

ABORT_WAIT_S = 5.0  # how long the policy waits for the dead worker's last lines to reach the driver


class Policy(DefaultFailurePolicy):
    """Ray Train's default failure policy, except that a trial whose own code raised (and whose processes are
    all alive) is not restarted; every decision goes to the trial's sink."""

    def __init__(self, failure_config, sink, capped: bool = False):
        super().__init__(failure_config)
        self.sink, self.capped = sink, capped  # capped: its workers run under --memory-cap-mb
        self.trial = 0  # the trial the restart budget counts for: a warm group runs several, each with its own

    def make_decision(self, training_failed_error):
        code, lost = code_failures(training_failed_error), lost_processes(training_failed_error)
        aborted = self.allocator_abort() if lost and self.capped else None
        running = self.running()
        if running is not None and running != self.trial:
            # --max-failures is per trial: Ray Train counts over its run, which is the whole group's
            self.trial, self._worker_group_failures = running, 0
        if code and not lost:
            decision, why = FailureDecision.RAISE, "not restarted: the trial's own code raised"
        elif lost and running is None:
            decision, why = (
                FailureDecision.RAISE,
                (
                    "not restarted: its warm group was idle, no trial running (the "
                    "next trial of its kind starts a new group, cold)"
                ),
            )
        elif aborted:
            decision, why = FailureDecision.RAISE, f"not restarted: {abort_cause(aborted)}"
        else:
            decision = super().make_decision(training_failed_error)
            why = (
                "restarted from the last checkpoint"
                if decision == FailureDecision.RETRY
                else "not restarted: the restart budget (--max-failures) is spent"
            )
        try:
            self.sink.failure.remote(time.time(), describe(training_failed_error), why)
        except Exception:  # noqa: BLE001 - the record is best effort; the decision stands
            pass
        return decision

    def running(self) -> int | None:
        """The trial running when the group failed, by its place in the group, or None: none was (a warm group's
        queue knows; a cold trial's sink: its one trial, 0)."""
        import ray

        try:
            return ray.get(self.sink.running.remote(), timeout=10)
        except Exception:  # noqa: BLE001 - no answer: as if the last one ran (Ray Train's own policy decides)
            return self.trial

    def allocator_abort(self) -> str | None:
        """The line a dead worker's allocator printed as it aborted (the driver passes it on), if it comes in time."""
        import ray

        deadline = time.monotonic() + ABORT_WAIT_S
        while time.monotonic() < deadline:
            try:
                line = ray.get(self.sink.abort_line.remote(), timeout=10)
            except Exception:  # noqa: BLE001 - no sink: a lost worker as any other
                return None
            if line:
                return line.strip()[-200:]
            time.sleep(0.2)
        return None


class StartGuard(ControllerCallback, WorkerGroupCallback):
    """Ends a worker group whose start failed after Ray Train had built it: its workers, synchronisation actor and
    placement group. Ray Train 2.60 cleans up a start that fails before that point only: an error in a backend's
    set-up (a process group that cannot form) or in launching the training function left the group holding its
    CPUs, and the invocation's next trial waited for them without end. (Its placement-group cleaner would not
    help: registered after the backend's set-up, and stopped, not run, when the controller ends cleanly.) The
    first of a run's callbacks (raylab/driver/trainer.py), so it sees the group before any set-up can fail."""

    def __init__(self):
        self._starting = None  # the group built and not yet training: the controller holds no handle to it

    def after_worker_group_start(self, worker_group) -> None:
        self._starting = worker_group.get_worker_group_state()

    def after_worker_group_training_start(self, worker_group) -> None:
        self._starting = None  # the controller's now: it shuts the group down itself

    def before_controller_execute_failure_decision(self, failure_decision) -> None:
        self._end()

    def after_controller_finish(self, result) -> None:
        self._end()

    def before_controller_abort(self) -> None:
        self._end()

    def _end(self) -> None:
        state, self._starting = self._starting, None
        if state is not None:
            state.shutdown()
