"""Fault injection for shared runs: real processes SIGKILLed (or Ray actors killed) mid-trial, several trials of
one invocation each losing the process its plan names.

A Killer thread acts on each trial once, at a point the trial is known to be at, and kills what the plan says for
that trial's next repeat: {"torch:ddp x2": ["worker", None]} kills a worker of the first repeat and leaves the
second alone (the uninterrupted twin the restarted one is compared with). The point is the held recipe's
(tests/held_recipe.py, run with its gate directory): a Ray Train worker of the trial holds mid-epoch 2 and says
so in the gate, and the trial is the one whose sink that process said hello to ("worker" kills that very process).
"worker@build" and "worker@last" kill it where torch's held model also holds, as it is built (the worker group
starting the trial) and at the evaluation after the last training step.
tf:ps holds in its graph, on a worker task, and its held file names the chief: "tf-worker", "tf-ps" and
"tf-chief" kill the task the plan names while that step waits. The trial cannot end first, however fast the
machine runs its steps; every hold is let go once acted on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path


def actor_pids(actor_class: str) -> list[int]:
    """Processes whose title Ray set to the actor's class (`ray::RayTrainWorker...`, `ray::ParameterServer...`)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            title = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and title.startswith(f"ray::{actor_class}"):
            pids.append(int(proc.name))
    return pids


def registered(ray, sink, prefix: str) -> int:
    """The pid a tf:ps process registered with its role (`chief-pid-N`, `worker-pid-N`, `ps-pid-N`)."""
    names = ray.get(sink.registered.remote(), timeout=30)
    return int(next(n for n in names if n.startswith(prefix)).rsplit("-", 1)[1])


def kill_server_actor(ray, sink) -> str:
    """torch:ps-*'s first parameter server, killed through Ray (ray.kill), as a lost actor."""
    (name,) = [n for n in ray.get(sink.registered.remote(), timeout=30) if n.endswith("/ps0")]
    handle, _ = ray.get(sink.lookup.remote([name]), timeout=30)[0]
    ray.kill(handle)
    return name


# What a plan can name besides "worker" (the held process itself), each -> a pid to SIGKILL (or a name, for what
# was killed through Ray).
VICTIMS = {
    "server": lambda ray, sink: max(actor_pids("ParameterServer")),  # torch:ps-*'s newest server process
    "tf-worker": lambda ray, sink: registered(ray, sink, "worker-pid-"),  # a tf:ps worker task
    "tf-ps": lambda ray, sink: registered(ray, sink, "ps-pid-"),  # a tf:ps parameter server task
    "tf-chief": lambda ray, sink: registered(ray, sink, "chief-pid-"),
    "server-actor": kill_server_actor,
}


class Killer(threading.Thread):
    """Kills, in each trial the plan names, what it names for that trial's next repeat, while the trial holds
    mid-epoch 2 (`gate`: the held recipe's gate directory)."""

    def __init__(self, ray, uri: str, plan: dict[str, list[str | None]], gate: Path):
        super().__init__(daemon=True)
        self.ray, self.uri, self.gate = ray, uri, gate
        self.plan = {name: list(victims) for name, victims in plan.items()}
        self.killed: list[tuple[str, str, object]] = []  # (trial name, run id, pid or name; None: left alone)
        self.stop = threading.Event()

    def run(self):
        """Each hold in the gate: its trial found by the process (the sink it said hello to); at the trial's first
        hold its repeat's plan is taken, and carried out once, at the first hold of the point it names (the trial's
        other holds, its other ranks' and a restarted worker's, are let go); every hold let go."""
        from mlflow.tracking import MlflowClient

        from tests.held_recipe import Gate

        client, planned, gate = MlflowClient(tracking_uri=self.uri), {}, Gate(self.gate)
        while not self.stop.is_set():  # until the run ends: every hold is let go, however long the run takes
            for held, pid, at in gate.holds():
                if (sink_name := self.sink_of(pid)) is None:
                    continue  # its hello not in yet
                run_id = sink_name.removeprefix("raylab-sink-")
                if run_id not in planned:
                    name = client.get_run(run_id).info.run_name
                    victims = self.plan.get(name)
                    planned[run_id] = (name, victims.pop(0) if victims else None)
                    if victims is not None and planned[run_id][1] is None:
                        self.killed.append((name, run_id, None))  # its uninterrupted repeat
                name, victim = planned[run_id]
                if victim and (victim.partition("@")[2] or "step") == at:
                    planned[run_id] = (name, None)
                    self.act(name, run_id, sink_name, pid, victim.partition("@")[0])
                gate.release(held)
            time.sleep(0.1)

    def act(self, name: str, run_id: str, sink_name: str, held_pid: int, victim: str) -> None:
        if victim == "worker":
            what = held_pid  # the very process that holds: its own worker, at the point held
        else:
            what = VICTIMS[victim](self.ray, self.ray.get_actor(sink_name))
        if isinstance(what, int):
            os.kill(what, signal.SIGKILL)
        self.killed.append((name, run_id, what))

    def sink_of(self, pid: int) -> str | None:
        for sink_name in self.sinks():
            try:
                if pid in {p for p, _ in self.ray.get(self.ray.get_actor(sink_name).pids.remote(), timeout=10)}:
                    return sink_name
            except Exception:  # noqa: BLE001 - its trial ended meanwhile
                continue
        return None

    def sinks(self) -> list[str]:
        names = [n["name"] if isinstance(n, dict) else n for n in self.ray.util.list_named_actors()]
        return sorted(n for n in names if n.startswith("raylab-sink-"))

    def killed_runs(self) -> set[str]:
        return {run_id for _, run_id, what in self.killed if what}


def no_train_workers_left(timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not actor_pids("RayTrainWorker") and not actor_pids("ParameterServer"):
            return True
        time.sleep(1)
    return False


def leftovers() -> list[str]:
    """raylab's Ray processes still alive: trial workers, parameter servers, sinks."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout
    return [
        line
        for line in out.splitlines()
        if line.startswith(("ray::RayTrainWorker", "ray::ParameterServer", "ray::TrialSink"))
    ]


def assert_nothing_left():
    deadline = time.monotonic() + 60
    while leftovers() and time.monotonic() < deadline:
        time.sleep(1)
    assert leftovers() == []


def children(client, parent_id):
    exp = client.get_run(parent_id).info.experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    return sorted(runs, key=lambda r: r.info.start_time)
