"""Fault tolerance pieces that need no cluster: bad tracking URIs and addresses, restart figures, the data
order after a restart, timing carried over a restart."""

from __future__ import annotations

import itertools
import time

import pytest
import torch

from raylab.record.sink import restart_figures
from raylab.frameworks.torch.worker import shuffled_batches
from raylab.timing import Chrono
from tests.unit.test_config import RECIPE, _main_fails, no_ray  # noqa: F401 - a fixture


def test_unknown_tracking_scheme_exits_2_in_one_line(no_ray, fashion_root, monkeypatch, capsys):
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    line = _main_fails(capsys, ["--quick", "--tracking-uri", "foo://bar"])
    assert "scheme 'foo'" in line and "sqlite://" in line


def test_dead_ray_address_is_a_user_error_within_seconds():
    from raylab.runtime.cluster import init_ray
    from raylab.errors import UserError

    start = time.monotonic()
    with pytest.raises(UserError, match="nothing answers at the Ray address 127.0.0.1:1"):
        init_ray("127.0.0.1:1")
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("argv", [["--max-failures", "-2"], ["--checkpoint-every", "-1"]])
def test_bad_fault_tolerance_flags_exit_2(no_ray, fashion_root, monkeypatch, capsys, argv):
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    _main_fails(capsys, ["--quick", *argv])


def test_resume_with_other_flags_is_refused(no_ray, fashion_root, monkeypatch, capsys):
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    assert "drop --epochs" in _main_fails(capsys, ["--resume", "last", "--epochs", "3"])


def test_restart_figures():
    a = {"start": 0.0, "first_step": 5.0, "checkpointed": 20.0, "alive": 27.0}
    b = {"start": 28.0, "first_step": 40.0, "checkpointed": None, "alive": 60.0}
    assert restart_figures([a]) == {"restarts": 0, "recovery_s": 0.0, "lost_s": 0.0}
    assert restart_figures([a, b]) == {"restarts": 1, "recovery_s": 13.0, "lost_s": 7.0}
    # a worker lost as the group started (before the loop's first attempt): the policy's decision counts it
    restarted = {"time": -4.0, "what": "worker process lost", "decision": "restarted from the last checkpoint"}
    assert restart_figures([a], [restarted]) == {"restarts": 1, "recovery_s": 9.0, "lost_s": 0.0}
    assert restart_figures([a, b], [{**restarted, "time": 27.5}]) == {"restarts": 1, "recovery_s": 13.0, "lost_s": 7.0}


@pytest.mark.parametrize("start", [0, 3, 7, 12, 25])
def test_batches_after_a_restart_go_on_where_they_were(start):
    """n=20, batch 6: 3 batches a pass; starting at `start` gives the uninterrupted stream from there."""
    whole = [b.tolist() for b in itertools.islice(shuffled_batches(20, 6, torch.Generator().manual_seed(1)), 40)]
    later = [
        b.tolist() for b in itertools.islice(shuffled_batches(20, 6, torch.Generator().manual_seed(1), start=start), 10)
    ]
    assert later == whole[start : start + 10]


def test_timing_carried_over_a_restart_leaves_the_new_warmup_out():
    first = Chrono(time.time(), warmup=2)
    for secs, steps in [(1.0, 1), (0.5, 1), (0.2, 4), (0.2, 4)]:
        first.windows.append((secs, steps))
    first.startup_s = 3.0
    state = first.state()
    assert state["steady"] == [[0.2, 4], [0.2, 4]] and state["warmup_steps"] == 2
    second = Chrono(time.time(), warmup=2)
    second.carried = state
    second.startup_s = 9.0
    second.windows += [(2.0, 1), (0.9, 1), (0.4, 4)]  # its own tracing step and warm-up are not steady
    summary = second.summary(global_batch=10)
    assert summary["startup_s"] == 3.0 and summary["steady_steps"] == 12
    assert summary["samples_per_sec"] == pytest.approx(120 / 0.8)
    assert second.state()["steady"] == [[0.2, 4], [0.2, 4], [0.4, 4]]


def test_handoff_sends_only_after_the_controller_took_the_report():
    """Handoff waits on the worker's result queue (a queue.Queue(maxsize=1), as Ray Train's): what follows a
    report is sent once the controller's poll has taken it (get_nowait + task_done), and finish() sends the rest."""
    import queue
    import threading

    from raylab.loop import Handoff

    handoff = Handoff()  # outside a Ray Train worker: no queue, sends at once
    sent: list[str] = []
    handoff.after_report(lambda: sent.append("now"))
    assert sent == ["now"]

    handoff = Handoff()
    handoff.queue = queue.Queue(maxsize=1)
    handoff.queue.put("epoch 1 report")
    handoff.after_report(lambda: sent.append("epoch 1"))
    time.sleep(0.3)
    assert sent == ["now"]  # not polled yet
    polled = threading.Event()

    def poll():
        handoff.queue.get_nowait()
        polled.set()  # taken, before task_done releases the handoff: "epoch 1" sent finds it set
        handoff.queue.task_done()

    threading.Timer(0.2, poll).start()
    deadline = time.monotonic() + 10
    while "epoch 1" not in sent and time.monotonic() < deadline:
        time.sleep(0.02)
    assert polled.is_set() and sent == ["now", "epoch 1"]

    handoff.queue.put("epoch 2 report")  # the last report: the trial ends before the next poll
    handoff.after_report(lambda: sent.append("epoch 2"))
    handoff.finish()
    assert sent == ["now", "epoch 1", "epoch 2"]
