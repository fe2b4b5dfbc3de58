"""Stop signals on the driver: SIGTERM (`ray job stop`, schedulers, `kill`), SIGHUP (a closed terminal) and SIGINT
(Ctrl-C) end an invocation the same way at any moment, as a KeyboardInterrupt: its runs end KILLED and the cluster it
started is shut down, so nothing of it is left running.

`taken()` holds the handlers for a whole command. Ray installs its own while `ray.init` runs (a SIGTERM handler
that exits, the head node's that kills its processes and exits, and its C++ failure handler, which aborts): a stop
then could leave the driver half-started, or a cluster with no one to shut it down. So `held()` keeps Ray's
handlers out during `ray.init` and `ray.shutdown`, notes a stop that comes meanwhile, and raises it as soon as the
cluster is whole (after a start) or simply lets the command end (after a shutdown). A SIGTERM that reaches Ray's
C++ failure handler in that window leaves an alarm armed to abort the process three seconds later; `held()`
disarms it.

Python runs a signal handler at the main thread's next bytecode, which may be inside a garbage-collection callback
(SQLAlchemy's, say), where an exception is printed as "Exception ignored" and dropped: the stop would be lost and
the invocation run on. `taken()` catches that in `sys.unraisablehook` and sends the signal to the main thread again.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading

STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Stop(KeyboardInterrupt):
    """A stop signal, raised where the main thread was (a KeyboardInterrupt, as Ctrl-C's)."""

    def __init__(self, signum: int, when: str = ""):
        super().__init__(f"stopped by {signal.Signals(signum).name}{when}")
        self.signum = signum


_state = {"taken": False, "held": False, "pending": None}


def _handler(signum, frame) -> None:
    if _state["held"]:
        _state["pending"] = signum
        return
    raise Stop(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def taken():
    """The stop signals raise `Stop` in the main thread while the body runs (the previous handlers come back
    after)."""
    if not _main_thread() or _state["taken"]:
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOPS}
    unraisable = sys.unraisablehook

    def dropped(info) -> None:
        if isinstance(info.exc_value, Stop):  # raised inside a finalizer, which swallows it: once more, elsewhere
            # (from another thread, a moment later: the main thread is still in the finalizer now)
            threading.Timer(0.05, _thread.interrupt_main, (info.exc_value.signum,)).start()
            return
        unraisable(info)

    _state["taken"] = True
    sys.unraisablehook = dropped
    try:
        _install()
        yield
    finally:
        _state["taken"] = False
        sys.unraisablehook = unraisable
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _install() -> None:
    for s in STOPS:
        signal.signal(s, _handler)


@contextlib.contextmanager
def held(raise_pending: bool = True):
    """Ray's start or shutdown, uninterrupted: Ray's own signal handlers are not installed, a stop that comes is
    noted, and raised when the body is done (`raise_pending`)."""
    if not _state["taken"] or not _main_thread():
        yield
        return
    from raylab._ray import ray_utils

    set_handler = ray_utils.set_sigterm_handler
    ray_utils.set_sigterm_handler = lambda handler: None  # ray.init's and the head node's
    _state["held"] = True
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = set_handler
        _state["held"] = False
        _install()  # Ray's C++ failure handler took SIGTERM at the C level while the core worker started
        signum, _state["pending"] = _state["pending"], None
        if signum == signal.SIGTERM:
            # It came through absl's failure handler (Ray's, while the core worker started or ended), which arms a
            # 3 s alarm that aborts the process (SIGABRT) before handing the signal on: disarmed, the stop ends
            # the command as any other stop does.
            signal.alarm(0)
        if signum is not None and raise_pending:
            raise Stop(signum, " while the Ray cluster started")
