"""--pin-cpus on real processes: a training process on CPUs of its own, the driver's other descendants (and the
driver) off them, everything back at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from raylab.settings import pinning
from raylab.settings.pinning import Pinning

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
needs_two = pytest.mark.skipif(len(CPUS) < 2 or not pinning.affinity_supported(), reason="needs 2 CPUs and Linux")

# a process with a second thread, and a child of its own: threads and grandchildren must follow
SLEEPER = (
    "import subprocess, sys, threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start();"
    " c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); print(c.pid, flush=True);"
    " time.sleep(60)"
)


def sleeper() -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    deadline = time.monotonic() + 10
    while len(list((pinning.PROC / str(proc.pid) / "task").iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc, child


@needs_two
def test_a_training_process_gets_cpus_of_its_own_and_the_rest_get_the_others():
    trainer, trainer_child = sleeper()
    other, other_child = sleeper()
    pin = Pinning(True, threads=1)
    try:
        pin.apply([trainer.pid])
        own, rest = {CPUS[-1]}, set(CPUS[:-1])
        assert all(
            os.sched_getaffinity(int(t.name)) == own for t in (pinning.PROC / str(trainer.pid) / "task").iterdir()
        )
        for pid in (other.pid, other_child, trainer_child, os.getpid()):  # a training process's own children too
            assert pinning.cpus_of(pid) == rest, pid
        assert pin.done.startswith(f"training processes on CPU {CPUS[-1]}; the cluster's ")
        assert f"on CPU {pinning.span(rest)}" in pin.done and "not moved" not in pin.done
        pin.apply([trainer.pid])  # the same processes: nothing to do
        tag = pin.end()
        assert tag == pin.done
        for pid in (trainer.pid, other.pid, other_child, trainer_child, os.getpid()):
            assert pinning.cpus_of(pid) == set(CPUS), pid
    finally:
        pin.restore()
        os.sched_setaffinity(0, set(CPUS))
        for p in (trainer, other):
            p.kill()
        for pid in (trainer_child, other_child):
            os.kill(pid, 9)
        for p in (trainer, other):
            p.wait(timeout=10)


@needs_two
def test_no_cpu_to_spare_or_not_asked_leaves_every_process_alone():
    proc, child = sleeper()
    try:
        full = Pinning(True, threads=len(CPUS))
        full.apply([proc.pid])
        assert pinning.cpus_of(os.getpid()) == set(CPUS) and pinning.cpus_of(proc.pid) == set(CPUS)
        assert full.end() == (
            f"not applied: 1 training process(es) x {len(CPUS)} CPU(s) leave no CPU of the "
            f"{len(CPUS)} for the rest of the cluster"
        )
        off = Pinning(False, threads=1)
        off.apply([proc.pid])
        assert off.end() == "off" and pinning.cpus_of(proc.pid) == set(CPUS)
        refused = Pinning(True, threads=1, why_not=pinning.refusal(nodes=2, owns_cluster=True))
        refused.apply([proc.pid])
        assert refused.end() == "not applied: the cluster has 2 nodes: CPUs are pinned on a one-node cluster only"
        assert pinning.cpus_of(proc.pid) == set(CPUS)
        assert Pinning(True, threads=1).end() == "not applied: no training process was seen"
    finally:
        proc.kill()
        os.kill(child, 9)
        proc.wait(timeout=10)


def test_pinning_is_refused_on_a_cluster_raylab_did_not_start():
    assert "not started by this driver" in pinning.refusal(nodes=1, owns_cluster=False)
    assert pinning.refusal(nodes=1, owns_cluster=True) is None or not pinning.affinity_supported()
