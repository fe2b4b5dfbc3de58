"""What ran beside a trial (raylab/loop/beside.py): a real burner process read off the node, the trial's own work
kept apart; the figures per node (record/figures.py); the verdict and the table say so (compare/parity.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

from raylab.compare import parity
from raylab.compare.table import format_table
from raylab.loop.beside import Beside
from raylab.record.figures import beside_figures

OWN_CORE = re.compile(r"the trial's own (0\.[89]\d|1\.[01]\d) of")  # about one core
BURN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"


def burner(script: str | None = None, env: dict | None = None) -> int:
    """A plain process burning a core for 30 s (BURN, or a script file that burns), not this process's child (its
    shell has left): its pid."""
    run = ["-c", BURN] if script is None else [script]
    out = subprocess.run(
        ["sh", "-c", '"$0" "$@" >/dev/null 2>&1 & echo $!', sys.executable, *run],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return int(out.stdout.strip())


def burn_here(seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        pass


def test_a_burner_beside_is_other_work_and_the_workers_own_burn_is_not():
    """One worker burning its core (its own) with a plain process burning another: about 1 core of other work, about
    1 of its own; the same worker alone: next to no other work."""
    alone = Beside()
    alone.begin()
    burn_here(1.5)
    metrics, tags = beside_figures([alone.end()], ["node-a"])
    assert metrics["beside_cores"] < 0.5, tags  # a unit test's machine is quiet enough for half a core

    pid = burner()
    try:
        time.sleep(0.3)  # its interpreter started
        crowded = Beside()
        crowded.begin()
        burn_here(2.0)
        read = crowded.end()
    finally:
        os.kill(pid, signal.SIGKILL)
    metrics, tags = beside_figures([read], ["node-a"])
    assert 0.7 <= metrics["beside_cores"] <= 1.3, tags  # the burner's core (on 2 cores: all the other one)
    assert OWN_CORE.search(tags["beside"]), tags
    assert tags["beside"].startswith("node node-a: ")


def test_a_child_of_the_worker_is_its_own_work():
    """A worker's children (a compile pool, a data loader) are the trial's, not its neighbours'."""
    watch = Beside()
    child = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        time.sleep(0.3)
        watch.begin()
        time.sleep(1.5)
        read = watch.end()
    finally:
        child.kill()
        child.wait()
    metrics, tags = beside_figures([read], ["n"])
    assert metrics["beside_cores"] < 0.5, tags
    assert OWN_CORE.search(tags["beside"]), tags


def test_ranks_on_one_node_add_their_own_work_and_each_node_is_said():
    # two ranks on node a: the first rank's read of this job's Ray processes holds the second rank's process (180
    # ticks of its own 200), which is the trial's own work, not upkeep
    first = {
        "seconds": 2.0,
        "busy": 400,
        "steal": 0,
        "all": 400,
        "own": 200,
        "ray": 190,
        "own_main": 180,
        "cpus": 2,
        "tick": 100,
    }
    second = {**first, "ray": 190}
    other = {"seconds": 2.5, "busy": 300, "steal": 40, "all": 400, "own": 100, "ray": 20, "cpus": 2, "tick": 100}
    metrics, tags = beside_figures([first, second, other], ["a", "a", "b"])
    assert tags["beside"].startswith(
        "node a: 0.00 cores of other work, 0.00 stolen, Ray and this job 0.05, the trial's own 2.00"
    )  # both ranks' own: the node's 2 cores
    assert (
        "node b: 0.90 cores of other work, 0.20 stolen, Ray and this job 0.10, the trial's own 0.50" in tags["beside"]
    )
    assert metrics == {"beside_cores": 0.9, "steal_cores": 0.2, "ray_daemon_cores": 0.1, "beside_s": 2.0}
    assert beside_figures([None], ["a"]) == ({}, {"beside": "not measured (no steady window, or no /proc to read)"})
    assert Beside().end() is None  # never begun: no window


def row(trial: str, beside: float | None, steal: float = 0.0, **more) -> dict:
    return {
        "trial": trial,
        "status": "FINISHED",
        "framework": trial.split(":")[0],
        "workers": 1,
        "samples_per_sec": 1000.0,
        "beside_cores": beside,
        "steal_cores": steal,
        **more,
    }


def test_the_verdict_is_not_fair_while_a_trial_measured_beside_other_work_is_compared():
    lines, mismatches = parity.parity([row("torch:none x1", 0.05), row("tf:none x1", 0.93)])
    assert "measured beside other work" in mismatches
    said = next(line for line in lines if "measured beside" in line)
    assert "tf:none x1 beside 0.93 cores of other work, 0.00 stolen" in said and "torch:none" not in said
    assert "quiet node" in said
    assert "measured beside other work" in parity.parity([row("tf:none x1", 0.1, steal=0.2)])[1]  # stolen counts
    _, mismatches = parity.parity([row("torch:none x1", 0.05), row("tf:none x1", 0.12)])
    assert "measured beside other work" not in mismatches
    _, mismatches = parity.parity([row("torch:none x1", None, None)])  # an old run without the figures: said nothing
    assert "measured beside other work" not in mismatches
    # a window too short to read: a 10 ms tick of another process is a tenth of a core over 0.1 s; not judged
    _, mismatches = parity.parity([row("torch:none x1", 0.67, beside_s=0.05)])
    assert "measured beside other work" not in mismatches
    assert "measured beside other work" in parity.parity([row("torch:none x1", 0.67, beside_s=1.5)])[1]


def test_the_table_shows_what_ran_beside_and_marks_the_crowded_trial():
    text = format_table([row("torch:none x1", 0.05), row("tf:none x1", 0.93)])
    header = text.splitlines()[0]
    assert "beside" in header
    tf = next(line for line in text.splitlines() if line.startswith("tf:none"))
    torch = next(line for line in text.splitlines() if line.startswith("torch:none"))
    assert tf.startswith("tf:none x1 ^") and "0.93 ^" in tf
    assert "^" not in torch and "0.05" in torch
    assert "^ measured beside other work" in text


def test_a_thread_of_the_worker_is_its_own_work():
    """Ray Train runs the training function on a thread of the worker: every thread of the process is its own."""
    watch = Beside()
    watch.begin()
    t = threading.Thread(target=burn_here, args=(1.5,))
    t.start()
    t.join()
    metrics, tags = beside_figures([watch.end()], ["n"])
    assert metrics["beside_cores"] < 0.5, tags


def starting_ray_worker(tmp_path, job: str) -> int:
    """A process as a Ray worker is while it starts, before it takes its ray:: title: Python running a script at
    Ray's worker path (here one that burns a core), RAY_JOB_ID its job. Not this process's child: its pid."""
    script = tmp_path / "ray" / "_private" / "workers" / "default_worker.py"
    script.parent.mkdir(parents=True)
    script.write_text(BURN)
    return burner(str(script), env={**os.environ, "RAY_JOB_ID": job})


def test_a_ray_worker_starting_for_this_job_is_upkeep_and_for_another_job_other_work(tmp_path):
    """A trial's sink or a warm trial's new Ray worker imports for a second or more before its title says ray::; its
    job in RAY_JOB_ID decides, as for a titled one (CI, 2026-12-07: a warm trial read such a start as other work)."""
    for job, other in (("0a000000", False), ("0b000000", True)):
        pid = starting_ray_worker(tmp_path / job, job)
        try:
            time.sleep(0.3)
            watch = Beside(job="0a000000")
            watch.begin()
            burn_here(1.5)
            read = watch.end()
        finally:
            os.kill(pid, signal.SIGKILL)
        metrics, tags = beside_figures([read], ["n"])
        if other:
            assert 0.7 <= metrics["beside_cores"] <= 1.3, tags
        else:
            assert metrics["beside_cores"] < 0.5 and metrics["ray_daemon_cores"] >= 0.7, tags
