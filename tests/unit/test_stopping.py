"""Stop signals on the driver (raylab/runtime/stopping.py): raised as a KeyboardInterrupt in the main thread, held
while Ray starts or stops, and sent again when Python drops one raised inside a finalizer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from raylab.runtime import stopping


def test_a_stop_signal_raises_stop_in_the_main_thread_and_the_old_handlers_come_back():
    before = {s: signal.getsignal(s) for s in stopping.STOPS}
    with pytest.raises(stopping.Stop, match="SIGHUP"), stopping.taken():
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(5)  # the handler runs at once: the sleep is interrupted
    assert {s: signal.getsignal(s) for s in stopping.STOPS} == before
    assert issubclass(stopping.Stop, KeyboardInterrupt)  # every `except KeyboardInterrupt` sees it


def test_a_stop_while_held_waits_for_the_end_of_the_block():
    with stopping.taken():
        reached = False
        with pytest.raises(stopping.Stop, match="SIGTERM while the Ray cluster started"):
            with stopping.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.2)
                reached = True  # not interrupted
        assert reached
        with stopping.held(raise_pending=False):  # a shutdown: the command ends anyway
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)


DROPPED = """
import gc, os, signal, sys, time
from raylab.runtime import stopping

class Finalized:
    def __del__(self):  # the handler runs in here, where Python drops what it raises
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass

with stopping.taken():
    try:
        Finalized()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.01)
        print("lost")
    except stopping.Stop as e:
        print("stopped:", e)
"""


def test_a_stop_python_drops_in_a_finalizer_is_sent_again():
    out = subprocess.run([sys.executable, "-c", DROPPED], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped: stopped by SIGTERM", (out.stdout, out.stderr[-2000:])
