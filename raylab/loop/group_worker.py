"""On the workers of a warm worker group (raylab/driver/groups.py): one Ray Train run whose training function runs
the group's trials in turn, as the driver hands them over.

Each trial is the worker loop its kind names, run as a cold trial runs it (`raylab.loop.guard.guarded`: what its code
raises ends the run, and with it the group). Between two trials the process is put back as a new one has it:
its framework's `reset()` (Keras' session and dtype policy, torch's default dtype and dynamo's compiled code,
jax's compiled functions), then a garbage collection, the heap given back to the system, and the peak-RSS
counter started over, so a trial records its own peak.

A restarted worker group (a lost worker) asks the queue for the first trial not finished by every rank and goes
on from there: that trial restores its own checkpoint (raylab/loop/checkpoint.py keeps a checkpoint to the
trial that saved it), and the trials after it follow. Ray Train's checkpoint is the one the processes started
with, so only the first trial they run may restore it (`WorkerConfig.restorable`): by a later trial it is an
earlier trial's, deleted once a newer one was kept.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import time

# How long a worker waits on the queue for its next trial, per call, before it asks again.
TAKE_WAIT_S = 30.0


def group_loop(config: dict) -> None:
    """The training function of a warm group's Ray Train run: config {"queue": the group's GroupQueue actor}."""
    import ray
    import ray.train

    from raylab.failure import CodeFailure
    from raylab.loop.guard import guarded
    from raylab.registry import framework_of, get_strategy

    queue = config["queue"]
    rank = ray.train.get_context().get_world_rank()
    index = ray.get(queue.first_unfinished.remote(), timeout=60)
    ran = 0
    while (item := take(queue, index)) is not None:
        kind, cfg = item
        if ran:
            between(framework_of(kind).part("worker").reset)
            cfg = dataclasses.replace(cfg, restorable=False)  # Ray Train's checkpoint is from before this trial
        ray.get(queue.started.remote(index, rank, time.time()), timeout=60)
        ran += 1
        try:
            guarded(get_strategy(kind).worker_loop, {"cfg": cfg})
        except CodeFailure as e:
            if not survivable(cfg, e):
                raise
            ray.get(queue.finished.remote(index, rank, e.line), timeout=60)
        else:
            ray.get(queue.finished.remote(index, rank), timeout=60)
        index += 1


def survivable(cfg, error) -> bool:
    """Whether the group goes on after a trial's failure: a --batch max probe of one process that ran out of memory
    (its answer: that size does not fit). Anything else ends the group, and a process of several ranks always
    does (the others may wait in a collective)."""
    return cfg.probe and error.kind == "out_of_memory" and cfg.replicas == 1


def take(queue, index: int):
    """The group's trial at `index` ((kind, WorkerConfig)), once the driver has handed it over; None when the
    group is closed."""
    import ray

    while True:
        item = ray.get(queue.take.remote(index, TAKE_WAIT_S), timeout=TAKE_WAIT_S + 60)
        if item != "wait":
            return item


def between(reset) -> None:
    """What one trial leaves behind, cleared before the next: the framework's state, garbage, the heap's free pages,
    the peak-RSS counter."""
    from raylab.loop.memory import reset_peak_rss

    reset()
    gc.collect()
    trim_heap()
    reset_peak_rss()


def trim_heap() -> None:
    """Gives glibc's free heap pages back to the system (a memory cap counts what the process holds, and a warm
    trial must start from what a cold one would)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc
        pass
