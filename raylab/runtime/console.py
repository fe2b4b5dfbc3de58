"""What the console shows: raylab's own lines; everyone else's output goes to a log file per trial.

Ray forwards every worker's and actor's stdout/stderr to the driver (Ray Train's controller lines, TF's
and XLA's C++ logging, gloo, warnings): by default raylab writes those to
`raylab-logs/<experiment>-<time>/<NN>-<trial>.log`, one file per trial (a process's lines go to the trial
that was running when it first spoke: every trial has its own fresh processes; while several trials run at
once, a process's lines wait until its trial claims it, its worker processes telling their trial's sink their
pids as they start, and lines nobody claims go to driver.log), and the driver's own
library logging (Ray, MLflow, Python warnings) to `driver.log` there. Each trial's file is logged as the
artifact of its MLflow run (under the file's name), and its path is printed when the trial fails. `--verbose`
shows all of it live as well, as Ray prints it.

Progress: on a terminal, a bar redrawn in place (one per running trial, side by side); otherwise a plain
line now and then.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import IO, Callable

ROOT = Path("raylab-logs")
QUIET_LOGGERS = ("ray", "mlflow", "alembic", "urllib3", "filelock", "py.warnings")
# the raylet's notice that many worker processes started at once ("... 4x the maximum expected startup concurrency")
WORKER_POOL_NOTICE = "worker processes have been started"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "trial"


class Console:
    """One per invocation: owns the log directory, routes Ray's forwarded output, draws progress."""

    def __init__(self, verbose: bool = False, name: str = "raylab", root: Path = ROOT, stream: IO | None = None):
        self.verbose = verbose
        self.dir = root / f"{slug(name)}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.lock = threading.Lock()
        self.files: dict[Path, IO] = {}
        self.owner: dict[tuple, Path] = {}  # (ip, pid) -> the log of the trial that process belongs to
        self.open: list[Path] = []  # the logs of the trials running now
        self.pending: dict[tuple, list[str]] = {}  # (ip, pid) -> lines waiting for their trial to claim them
        self.watchers: dict[Path, tuple] = {}  # a trial's log -> (which lines, who is told them)
        self.count = 0
        self.bar_shown = False
        self.bars: dict[str, tuple[str, str]] = {}  # running trial -> (its full bar, a short one)

    # -- the driver's own library logging --------------------------------------------------------------
    def quiet_libraries(self) -> None:
        """Ray's, MLflow's and Python's warnings and notices go to driver.log, not the console (unless
        verbose). Called before MLflow or Ray say anything; init_ray passes configure_logging=False, which
        empties the "ray" logger's handlers and leaves its records to reach the root logger's file."""
        if self.verbose:
            return
        global _driver_handler
        handler = DriverLog(self.path("driver.log"), delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.captureWarnings(True)
        import mlflow  # noqa: F401 - both install their own console handlers on import: undone here
        import ray  # noqa: F401

        root = logging.getLogger()
        if _driver_handler is not None:  # an earlier invocation in this process (tests)
            root.removeHandler(_driver_handler)
            _driver_handler.close()
        root.addHandler(handler)
        _driver_handler = handler
        root.setLevel(logging.INFO)
        for name in QUIET_LOGGERS:
            logger = logging.getLogger(name)
            for h in list(logger.handlers):
                logger.removeHandler(h)
            logger.propagate = True

    def path(self, name: str) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / name

    # -- Ray's forwarded worker output -------------------------------------------------------------------
    def take_worker_output(self) -> None:
        """After ray.init(log_to_driver=True): Ray's printer is replaced by one that writes each batch to its
        trial's file (and prints it too with --verbose)."""
        from raylab._ray import ray_logging

        dispatcher = ray_logging.global_worker_stdstream_dispatcher
        printer = [h for name, h in dispatcher.handlers if name == "ray_print_logs"]
        dispatcher.remove_handler("ray_print_logs")

        def handle(data: dict) -> None:
            self.write_batch(data)
            if self.verbose and printer:
                self.clear_bar()
                printer[0](data)

        dispatcher.add_handler("ray_print_logs", handle)  # the name Ray removes again at shutdown
        self.route_cluster_notices()

    def route_cluster_notices(self) -> None:
        """The raylet's notice that many worker processes started at once (Ray Data's tasks starting beside a
        trial's workers; not an error) goes to driver.log, not the terminal (printed too with --verbose). Ray prints
        the cluster's error messages through Ray's private worker.print_to_stdstream; every other one still does."""
        from raylab._ray import ray_worker

        printer = getattr(ray_worker.print_to_stdstream, "raylab_original", ray_worker.print_to_stdstream)

        def routed(data: dict, ignore_prefix: bool) -> None:
            if data.get("pid") == "raylet" and any(WORKER_POOL_NOTICE in line for line in data.get("lines") or []):
                self.write_batch(data)
                if not self.verbose:
                    return
            printer(data, ignore_prefix)

        routed.raylab_original = printer
        ray_worker.print_to_stdstream = routed

    def write_batch(self, data: dict) -> None:
        lines = data.get("lines") or []
        if not lines:
            return
        who = data.get("actor_name") or data.get("task_name") or ""
        pid, ip = data.get("pid"), data.get("ip")
        prefix = f"({who + ' ' if who else ''}pid={pid}, ip={ip}) "
        with self.lock:
            if not str(pid).isdigit():  # the cluster's own: "autoscaler", "raylet"
                target = self.path("driver.log")
            elif (ip, pid) in self.owner:
                target = self.owner[(ip, pid)]
            elif len(self.open) > 1:  # several trials running: wait for the process's trial to claim it
                self.pending.setdefault((ip, pid), []).extend(prefix + line for line in lines)
                return
            else:
                target = self.owner.setdefault((ip, pid), self.open[0] if self.open else self.path("driver.log"))
            self._write(target, [prefix + line for line in lines])

    def claim(self, ip, pid, path: Path) -> None:
        """A trial's worker process said who it is: its lines so far, and from now on, go to the trial's log."""
        with self.lock:
            if (ip, pid) in self.owner:
                return
            self.owner[(ip, pid)] = path
            self._write(path, self.pending.pop((ip, pid), []))

    def _write(self, path: Path, lines: list[str]) -> None:
        if lines:
            out = self._open(path)
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            match, told = self.watchers.get(path, (None, None))
            for line in filter(match, lines) if match is not None else ():
                told(line)

    def watch(
        self, path: Path, match: Callable[[str], bool] | None, told: Callable[[str], object] | None = None
    ) -> None:
        """`told(line)` for each line written to `path` (a trial's log) that `match`es: a worker's allocator aborting
        the process under --memory-cap-mb (raylab/failure.py allocator_abort), which the trial's failure policy
        waits for to name a lost worker's cause. match None: no longer."""
        with self.lock:
            if match is None:
                self.watchers.pop(path, None)
            else:
                self.watchers[path] = (match, told)

    def _open(self, path: Path) -> IO:
        if path not in self.files:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.files[path] = open(path, "a", encoding="utf-8", errors="replace")
        return self.files[path]

    # -- trials ------------------------------------------------------------------------------------------
    def begin_trial(self, label: str) -> Path:
        """The log file of the trial starting now (new processes that speak from now on belong to it)."""
        with self.lock:
            self.count += 1
            path = self.path(f"{self.count:02d}-{slug(label)}.log")
            self._open(path)
            self.open.append(path)
            return path

    def end_trial(self, path: Path) -> None:
        """The trial has ended; once at most one trial runs, lines nobody claimed go to driver.log."""
        with self.lock:
            if path in self.open:
                self.open.remove(path)
            self.bars.pop(path.stem.split("-", 1)[-1], None)
            if len(self.open) <= 1:
                for (ip, pid), lines in self.pending.items():
                    self._write(self.path("driver.log"), lines)
                    self.owner[(ip, pid)] = self.path("driver.log")
                self.pending.clear()

    def trial_text(self, path: Path, text: str) -> None:
        """Output captured by raylab itself (a plain script's subprocess) into a trial's log."""
        with self.lock:
            out = self._open(path)
            out.write(text if text.endswith("\n") or not text else text + "\n")
            out.flush()

    def close(self) -> None:
        with self.lock:
            for f in self.files.values():
                f.close()
            self.files.clear()

    # -- raylab's own lines ------------------------------------------------------------------------------
    def line(self, text: str, err: bool = False) -> None:
        self.clear_bar()
        print(text, file=sys.stderr if err else self.stream, flush=True)

    def bar(self, label: str, p: dict, left_s: float | None) -> None:
        """A progress bar redrawn in place on a terminal; a plain line otherwise (the caller throttles)."""
        done, total = steps_done(p)
        eta = "" if left_s is None else f" {fmt_s(left_s)} left"
        figures = (
            f"epoch {p['epoch']}/{p['epochs']} step {p['step']}/{p['steps']} "
            f"{p['samples_per_sec']:,.0f} samples/s loss {p['loss']:.4f}{eta}"
        )
        if not self.tty:
            self.line(f"[{label}] {figures}")
            return
        columns = shutil.get_terminal_size((100, 20)).columns
        width = max(10, min(30, columns - len(label) - len(figures) - 12))
        full = int(width * min(done / total, 1.0))
        text = f"[{label}] |{'#' * full}{'.' * (width - full)}| {100 * done / total:3.0f}% {figures}"
        short = f"[{label}] {100 * done / total:3.0f}% {p['samples_per_sec']:,.0f}/s{eta}"
        with self.lock:
            self.bars[slug(label)] = (text, short)
            # One trial: its full bar; several at once: a short one each, side by side.
            shown = text if len(self.bars) == 1 else "  ".join(b[1] for b in self.bars.values())[: columns - 1]
            self.stream.write("\r\x1b[2K" + shown)
            self.stream.flush()
            self.bar_shown = True

    def clear_bar(self) -> None:
        if self.bar_shown:
            with self.lock:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self.bar_shown = False


def steps_done(p: dict) -> tuple[int, int]:
    """(steps done in the trial, its steps in all) from a progress report."""
    return (p["epoch"] - 1) * p["steps"] + p["step"], max(p["epochs"] * p["steps"], 1)


def fmt_s(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def time_left(done: int, total: int, first: tuple[float, int] | None, now: float) -> float | None:
    """Seconds left at the rate seen since the first progress report (time, steps done then)."""
    if first is None or done <= first[1]:
        return None
    rate = (done - first[1]) / max(now - first[0], 1e-9)
    return (total - done) / rate


class DriverLog(logging.FileHandler):
    """driver.log. It stays the root logger's handler after the invocation returns (its process may log on, at
    exit included); a record that comes once its directory is gone (an in-process invocation's logs removed
    while the process goes on, as a test's tmp dir is) is dropped instead of raising into the code that logged."""

    def emit(self, record: logging.LogRecord) -> None:
        if self.stream is None and not os.path.isdir(os.path.dirname(self.baseFilename)):
            return
        super().emit(record)


_console: Console | None = None
_driver_handler: logging.Handler | None = None


def get() -> Console:
    """The invocation's console; without one (raylab used as a library, tests) a verbose one with its logs
    in the temporary directory."""
    global _console
    if _console is None:
        import tempfile

        _console = Console(verbose=True, root=Path(tempfile.gettempdir()) / "raylab-logs")
    return _console


def install(console: Console) -> Console:
    global _console
    _console = console
    return console
