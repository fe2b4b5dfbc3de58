"""The worker loop's parts on their own: its state, host-read counting, batch sources, the step context."""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import numpy as np
import pytest

from raylab.loop import Batches, LoopState, StepContext
from raylab.loop.checkpoint import Checkpointer, Saver
from raylab.loop.report import HostReads


def test_loop_state_survives_its_json_round_trip():
    state = LoopState(
        epoch=2,
        step=64,
        sums=[1.5, 3.0, 4.0],
        epoch_s=1.25,
        done=448,
        reads=14,
        host_syncs=20,
        epochs=[{"epoch": 1, "val_accuracy": 0.8}],
        checkpoints=3,
        checkpoint_s=0.5,
        interval=64,
    )
    back = LoopState.from_json(json.loads(json.dumps(state.to_json())))
    assert back == state
    np.testing.assert_array_equal(back.epoch_sums(), [1.5, 3.0, 4.0])
    assert LoopState(sums=[1.0], step=0).epoch_sums() == 0.0  # a checkpoint at an epoch's end: start afresh


def test_host_reads_count_the_loop_reads_without_a_framework_counter():
    reads = HostReads(None, reads=3)
    reads.begin()
    reads.read(), reads.read()
    reads.settle()
    assert reads.total == 5


def test_host_reads_count_the_framework_counter_between_begin_and_settle_only():
    counter = [10]
    reads = HostReads(lambda: counter[0], counted=4)
    reads.begin()
    counter[0] += 7  # training windows
    reads.read()
    reads.settle()
    counter[0] += 100  # evaluation: between settle() and the next begin()
    reads.begin()
    counter[0] += 2
    reads.settle()
    assert reads.total == 4 + 7 + 2 and reads.reads == 1


def test_batches_restart_after_done_and_time_their_waits():
    source = Batches(lambda done: iter(range(done, 100)))
    assert [source.next() for _ in range(3)] == [0, 1, 2]
    source.restart(40)
    assert source.next() == 40
    assert source.wait_s >= 0.0
    assert Batches(lambda done: iter(range(3)), timed=False).wait_s is None  # read inside a graph: not timed


def test_torch_shard_batches_restart_where_an_uninterrupted_run_would_be():
    torch = pytest.importorskip("torch")
    from raylab.frameworks.torch.worker import shard_batches

    x, y = torch.arange(40.0).reshape(20, 2), torch.arange(20)
    whole = shard_batches(x, y, 3, seed=7)
    seen = [whole.next()[1].tolist() for _ in range(14)]  # past one pass of 6 batches
    again = shard_batches(x, y, 3, seed=7)
    again.restart(8)
    assert [again.next()[1].tolist() for _ in range(6)] == seen[8:]


def test_step_context_wraps_nothing_unless_asked():
    plain = StepContext()
    assert plain.profile is None
    assert isinstance(plain.forward(), contextlib.nullcontext)
    assert StepContext("bf16", autocast=lambda: contextlib.nullcontext("bf16")).forward().enter_result == "bf16"


@pytest.mark.parametrize("profile, rank, profiled", [(True, 0, True), (True, 1, False), (False, 0, False)])
def test_the_loop_profiles_rank_0s_first_steady_window_once(profile, rank, profiled):
    """--profile: the framework's capture is entered for the first window after the warm-up, on rank 0, once."""
    from raylab.loop.epochs import Loop, Training
    from raylab.loop.worker_config import WorkerConfig

    entered = []

    @contextlib.contextmanager
    def capture(logdir, found):
        entered.append(logdir)
        yield

    cfg = WorkerConfig(
        trial="t",
        short="none",
        task=None,
        shared=None,
        replicas=1,
        batch_per_replica=4,
        epochs=1,
        threads=1,
        seed=0,
        warmup_steps=8,
        trial_start=0.0,
        sink=None,
        profile=profile,
    )
    training = Training(
        64, lambda k: np.zeros(3), dict, lambda *a: {}, {}, lambda: None, step=StepContext(profile=capture)
    )
    loop = Loop(cfg, rank, training)
    assert loop.profiler(1) is None  # the first step: warm-up
    loop.own = 8  # the warm-up is done
    first = loop.profiler(32)
    assert (first is not None) == profiled and len(entered) == int(profiled)
    if first is not None:
        first.close()
    assert loop.profiler(32) is None  # one window per attempt


@pytest.mark.parametrize(
    "saver, checkpoint, every, said",
    [
        (Saver(print, print), True, 600.0, "epoch ends and every 600 s"),
        (Saver(print, print), True, 0.0, "epoch ends"),
        (Saver(print, print), False, 600.0, "off (--max-failures 0)"),
        (None, True, 600.0, "not supported by this trial"),
    ],
)
def test_checkpointer_says_what_it_does(saver, checkpoint, every, said):
    cfg = SimpleNamespace(checkpoint=checkpoint, checkpoint_every_s=every, window=32)
    checkpointer = Checkpointer(cfg, 1, saver)  # rank 1: no Ray Train context needed to describe itself
    assert checkpointer.describe() == said
    assert checkpointer.figures(LoopState(checkpoints=2, checkpoint_s=1.0)) == (
        {"checkpoints": 2, "checkpoint_s": 1.0} if checkpointer.on else {}
    )
    state, chrono = LoopState(done=96, interval=64), SimpleNamespace(warmup=5)
    assert checkpointer.due(state, 96, chrono, 50, 100) == (checkpointer.on and every > 0)
    assert not checkpointer.due(state, 96, chrono, 100, 100)  # an epoch's end checkpoints anyway
    checkpointer.saved_done = 64
    assert not checkpointer.due(state, 96, chrono, 50, 100)  # 32 steps since the last: not yet


def _timed_loop(seconds, steps_per_epoch=100_000, epochs=3):
    """A Loop over a training step that takes about 1 ms, rank 1 (nothing reported), ready to run epochs."""
    import time

    from raylab.loop.epochs import Loop, Training
    from raylab.loop.worker_config import WorkerConfig

    def train(k):
        time.sleep(k * 1e-3)
        return np.ones(3) * k

    results = []
    cfg = WorkerConfig(
        trial="t",
        short="none",
        task=None,
        shared=None,
        replicas=1,
        batch_per_replica=4,
        epochs=epochs,
        threads=1,
        seed=0,
        warmup_steps=8,
        trial_start=0.0,
        sink=None,
        window=4,
        seconds=seconds,
    )
    training = Training(
        steps_per_epoch, train, dict, lambda sums, steps, prefix: results.append(steps) or {}, {}, lambda: None
    )
    loop = Loop(cfg, 1, training)
    loop.state, loop.host = LoopState(), HostReads(None)
    return loop, results


def test_seconds_end_the_epoch_at_the_window_whose_steady_steps_reach_them():
    """--seconds: the loop stops at the first window that brings the steady (post-warm-up) seconds to them, mid-epoch,
    and the epoch's figures are over the steps it ran; without --seconds every step of the epoch runs."""
    loop, results = _timed_loop(0.2)
    loop.end_epoch(1, *loop.epoch_windows(1))
    steady = loop.chrono.steady_s()
    last = loop.chrono.windows[-1][0]
    assert 0.2 <= steady < 0.2 + last + 1e-9, (steady, last)  # the window that reached it was the last
    assert results == [loop.state.done] and 8 + 4 < loop.state.done < 2_000, (results, loop.state.done)
    assert loop.timed_enough() and loop.steady_left() == 0.0

    whole, ran = _timed_loop(None, steps_per_epoch=40)
    whole.end_epoch(1, *whole.epoch_windows(1))
    assert ran == [40] and whole.state.done == 40 and not whole.timed_enough() and whole.steady_left() is None


def test_seconds_count_an_earlier_attempts_steady_windows():
    """A restarted trial's carried steady windows count toward --seconds, as they count toward its samples/s."""
    loop, _ = _timed_loop(0.5)
    loop.chrono.carried = {"steady": [[0.45, 100]], "startup_s": 1.0, "first_step_s": 0.1, "warmup_steps": 8}
    loop.epoch_windows(1)
    assert 0.5 <= loop.chrono.steady_s() and loop.state.done < 200, loop.state.done
