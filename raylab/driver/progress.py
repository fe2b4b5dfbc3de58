"""Watching a running trial: a thread polls its sink, prints progress and logs each epoch to MLflow."""

from __future__ import annotations

import threading
import time

import ray

from raylab.runtime import console
from raylab.settings.pinning import Pinning
from raylab.record.tracking import Tracker

POLL_S = 2.0  # how often the driver logs new epochs to MLflow
PRINT_EVERY_S = 10.0  # how often it prints a progress line between epochs
PIN_POLL_S = 0.2  # how often it looks for the trial's processes to pin (--pin-cpus) until it has


class Progress(threading.Thread):
    """Polls the sink while fit() runs: prints progress, logs each epoch as it arrives."""

    def __init__(
        self,
        sink,
        tracker: Tracker,
        run_id: str,
        label: str,
        synthetic: bool = False,
        log=None,
        pinning: Pinning | None = None,
    ):
        super().__init__(daemon=True)
        self.pinning = pinning or Pinning(False, 1)  # --pin-cpus: applied as the trial's processes say hello
        self.sink, self.tracker, self.run_id, self.label, self.log = sink, tracker, run_id, label, log
        self.synthetic = synthetic  # random labels: the accuracy is chance, so it is not printed
        self.logged, self.stopping, self.last_line, self.printed = 0, threading.Event(), None, 0.0
        self.noted = 0  # the workers' lines printed so far
        self.first: tuple[float, int] | None = None  # (time, steps done) at the first progress report

    def run(self):
        while not self.stopping.wait(PIN_POLL_S if self.pinning.waiting() else POLL_S):
            self.poll()

    def poll(self) -> tuple[list, dict | None]:
        try:
            (latest, epochs, final), pids, notes = ray.get(
                [self.sink.poll.remote(), self.sink.pids.remote(), self.sink.notes.remote()], timeout=30
            )
        except Exception:  # noqa: BLE001 - a slow poll is retried next time
            return [], None
        for note in notes[self.noted :]:  # a worker's warning, on raylab's console rather than in its Ray log
            console.get().line(f"[{self.label}] WARNING: {note}")
        self.noted = len(notes)
        self.pinning.apply([pid for pid, _ in pids])
        if self.log is not None:
            for pid, ip in pids:
                console.get().claim(ip, pid, self.log)
        self.log_epochs(epochs)
        ended = epochs[-1]["epoch"] if epochs else 0  # the sink keeps them in order
        # A report from an epoch whose end is logged is stale: its line would follow "epoch N done".
        if latest and latest != self.last_line and final is None and latest["epoch"] > ended:
            self.show(latest)
        return epochs, final

    def log_epochs(self, epochs: list[dict]) -> None:
        for e in epochs[self.logged :]:
            metrics = {k: v for k, v in e.items() if k != "epoch"}
            self.tracker.log_metrics(self.run_id, metrics, step=e["epoch"])
            # Synthetic data has random labels: its metrics are chance and are not printed.
            val = "" if self.synthetic else held_out(e)
            console.get().line(
                f"[{self.label}] epoch {e['epoch']} done in {e['epoch_time_s']:.1f}s loss {e['train_loss']:.4f}{val}"
            )
        self.logged = len(epochs)

    def show(self, latest: dict) -> None:
        out = console.get()
        every = POLL_S if out.tty else PRINT_EVERY_S  # a bar redrawn in place; plain lines less often
        now = time.monotonic()
        if now - self.printed < every:
            return
        done, total = console.steps_done(latest)
        self.first = self.first or (now, done)
        self.last_line, self.printed = latest, now
        left = console.time_left(done, total, self.first, now)
        if latest.get("steady_left_s") is not None:  # --seconds: it ends when its steady steps reach them
            left = latest["steady_left_s"] if left is None else min(left, latest["steady_left_s"])
        out.bar(self.label, latest, left)

    def finish(self) -> tuple[list, dict | None]:
        self.stopping.set()
        self.join(timeout=60)
        polled = self.poll()
        console.get().clear_bar()
        return polled


def held_out(result: dict) -> str:
    """The figures on the held-out split, as the console prints them: recorded as val_* (Keras' names), shown as the
    table and the chart show them, on the test split (" test_loss 1.900 test_accuracy 0.8123")."""
    return "".join(f" test_{k[4:]} {v:#.4g}" for k, v in result.items() if k.startswith("val_"))
