"""A trial's sink: the one Ray actor per trial that its workers send to and the driver polls.

Owned by the driver, so it outlives a worker group that Ray Train restarts. Its roles are small plain classes,
each with its own state, composed into the one `TrialSink` actor (one actor per trial: more would cost
start-up); the actor's method names are the workers' protocol and do not change.

- `TrialLog`: progress, per-epoch metrics (each epoch's first arrival), rank 0's final result, checksums, and
  the lines a worker has for the console (a streamed split that looks sorted, raylab/data/deliver.py).
- `Attempts`: each worker-group attempt's start, last sign of life, last checkpoint; the checkpoint interval.
- `ServerRegistry`: parameter-server trials' servers, and the workers' done and report-round counts.
- `WorkerProcesses`: the trial's worker processes (pid, node ip) and the environment each started with.
"""

from __future__ import annotations

import ray


def sink_name(run_id: str) -> str:
    """The sink's actor name: tools and tests find a trial's sink by its MLflow run id."""
    return f"raylab-sink-{run_id}"


class TrialLog:
    """Progress, epochs, the final result and each rank's parameter checksum."""

    def __init__(self, epochs: list | None = None):
        self.latest: dict | None = None  # rank 0's last progress fields
        self.epochs: list[dict] = list(epochs or [])  # per-epoch metrics, in epoch order, each epoch once
        self.final: dict | None = None  # rank 0's final report
        self.checksums: dict[int, object] = {}  # rank -> its parameters' checksum at the end
        self.nodes: dict[int, str | None] = {}  # rank -> the Ray node it ran on
        self.peaks: dict[int, float | None] = {}  # rank -> its process's peak RSS, MB
        self.besides: dict[int, dict | None] = {}  # rank -> its node read over its timed window (loop/beside.py)
        self.notes: list[str] = []  # lines a worker has for raylab's console, each once

    def epoch(self, fields: dict) -> None:
        # An epoch re-sent from a checkpoint after a restart is not logged twice: its first arrival is kept.
        if all(e["epoch"] != fields["epoch"] for e in self.epochs):
            self.epochs.append(fields)
            self.epochs.sort(key=lambda e: e["epoch"])

    def note(self, line: str) -> None:
        if line not in self.notes:  # a restarted worker group says it again
            self.notes.append(line)

    def checksum(self, rank: int, value, node_id=None, peak_rss_mb=None, beside=None) -> None:
        self.checksums[rank] = value
        self.nodes[rank] = node_id
        self.peaks[rank] = peak_rss_mb
        self.besides[rank] = beside

    def by_rank(self, per_rank: dict) -> list:
        return [per_rank[r] for r in sorted(per_rank)]


class Attempts:
    """Restarts: rank 0 says when each attempt starts, that it is alive (every 0.5 s), when it checkpointed."""

    def __init__(self):
        self.attempts: list[dict] = []  # per worker-group attempt: start, alive, first_step, checkpointed
        self.steps_interval: int | None = None  # steps between checkpoints, as the first attempt chose them
        self.failures: list[dict] = []  # each failure of the worker group: when, what, restarted or not
        self.profile: tuple[dict, str] | None = None  # rank 0's profiled window (--profile): files, what

    def start(self, now: float) -> None:
        self.attempts.append({"start": now, "alive": now, "first_step": None, "checkpointed": None})

    def alive(self, now: float) -> None:
        a = self.attempts[-1]
        a["alive"] = now
        a["first_step"] = a["first_step"] or now

    def checkpointed(self, now: float) -> None:
        self.attempts[-1]["checkpointed"] = now
        self.attempts[-1]["alive"] = now

    def set_interval(self, steps: int) -> None:
        self.steps_interval = self.steps_interval or steps  # the first attempt's: every rank must agree


class ServerRegistry:
    """Parameter-server trials: hosts publish their servers, workers look them up and say when they are done;
    names carry the worker group's id, so a restarted group never finds the dead group's servers."""

    def __init__(self):
        self.servers: dict[str, tuple] = {}  # server name -> (actor handle, its shard)
        self.done: dict[str, int] = {}  # worker group -> workers that finished
        self.rounds: dict[str, int] = {}  # worker group -> report rounds reached

    def lookup(self, names: list[str]):
        return [self.servers[n] for n in names] if all(n in self.servers for n in names) else None

    def count(self, counts: dict[str, int], group: str) -> None:
        counts[group] = counts.get(group, 0) + 1


class WorkerProcesses:
    """The trial's worker processes: their output belongs to the trial (raylab/runtime/console.py)."""

    def __init__(self):
        self.processes: list[tuple[int, str]] = []  # (pid, node ip), in the order they said hello
        self.environs: dict[int, dict] = {}  # pid -> what raylab set in its environment, as it started
        self.abort: str | None = None  # a worker's allocator abort line, seen by the driver (raylab/failure.py)


@ray.remote(num_cpus=0)
class TrialSink:
    """Where a trial's workers send progress, epochs, results, attempts, servers and pids (roles above)."""

    def __init__(self, epochs: list | None = None):
        self.log, self.tries = TrialLog(epochs), Attempts()
        self.ps, self.workers = ServerRegistry(), WorkerProcesses()

    # Worker processes (raylab/frameworks/prewarm.py).
    def hello(self, pid, ip):
        """A worker process of this trial has started: its output belongs to the trial."""
        self.workers.processes.append((pid, ip))

    def pids(self):
        return list(self.workers.processes)

    def started_env(self, pid, env):
        """What a worker process found in its environment at its start (raylab/frameworks/prewarm.py)."""
        self.workers.environs[pid] = env

    def started_envs(self):
        return [self.workers.environs[pid] for pid, _ in self.workers.processes if pid in self.workers.environs]

    # A worker's allocator aborting it under --memory-cap-mb (raylab/failure.py ALLOCATOR_ABORT_TEXT).
    def aborted(self, line):
        """The driver saw it in a worker's output: the first one is kept."""
        self.workers.abort = self.workers.abort or line

    def abort_line(self):
        return self.workers.abort

    # The trial log.
    def progress(self, fields):
        self.log.latest = fields

    def epoch(self, fields):
        self.log.epoch(fields)

    def result(self, fields):
        self.log.final = fields

    def note(self, line):
        """A line a worker has for raylab's console (the driver prints it as a WARNING, once)."""
        self.log.note(line)

    def notes(self):
        return list(self.log.notes)

    def checksum(self, rank, value, node_id=None, peak_rss_mb=None, beside=None):
        self.log.checksum(rank, value, node_id, peak_rss_mb, beside)

    def poll(self):
        return self.log.latest, list(self.log.epochs), self.log.final

    def replica_checksums(self):
        return self.log.by_rank(self.log.checksums)

    def worker_nodes(self):
        return self.log.by_rank(self.log.nodes)

    def peak_rss(self):
        return self.log.by_rank(self.log.peaks)

    def besides(self):
        return self.log.by_rank(self.log.besides)

    # Attempts and the checkpoint interval.
    def attempt(self, now):
        self.tries.start(now)

    def alive(self, now):
        self.tries.alive(now)

    def checkpointed(self, now):
        self.tries.checkpointed(now)

    def history(self):
        return list(self.tries.attempts)

    def profile(self, files, what):
        """Rank 0's profiled window: its files by relative path, and what it was (raylab/loop/profile.py)."""
        if self.tries.profile is None:  # a restarted attempt's profile is not kept: the first is the trial's
            self.tries.profile = (files, what)

    def profiled(self):
        return self.tries.profile

    def failure(self, now, what, decision):
        """A failure of the worker group, and what Ray Train's policy (raylab/failure.py) did about it, with the
        attempt it ended (1 is the first; 0: none had begun its loop) and the worker processes that had said hello
        by then (the newest are that attempt's)."""
        self.tries.failures.append(
            {
                "time": now,
                "what": what,
                "decision": decision,
                "attempt": len(self.tries.attempts),
                "pids": [pid for pid, _ in self.workers.processes],
            }
        )

    def failures(self):
        return list(self.tries.failures)

    def running(self):
        """A cold trial's group runs that trial whenever it fails: its only one, 0 (a warm group's queue may be idle
        or on another trial: GroupQueue)."""
        return 0

    def set_interval(self, steps):
        self.tries.set_interval(steps)

    def interval(self):
        return self.tries.steps_interval

    # The parameter-server registry.
    def register(self, name, handle, shard):
        self.ps.servers[name] = (handle, shard)

    def lookup(self, names):
        return self.ps.lookup(names)

    def registered(self):
        return {name: shard for name, (_, shard) in self.ps.servers.items()}

    def finish(self, group=""):
        self.ps.count(self.ps.done, group)

    def finished(self, group=""):
        return self.ps.done.get(group, 0)

    def report_round(self, group=""):
        self.ps.count(self.ps.rounds, group)

    def report_rounds(self, group=""):
        return self.ps.rounds.get(group, 0)


def restart_figures(attempts: list[dict], failures: list[dict] = ()) -> dict:
    """restarts (the restarts Ray Train made, as its policy decided them: a worker lost before the training loop
    began leaves no attempt of its own; else the attempts after the first), recovery_s (a failure, as the failed
    attempt's last sign of life or the decision, to the next attempt's first step) and lost_s (the failed attempt's
    training after its last checkpoint, done again)."""
    recovery = lost = 0.0
    for before, after in zip(attempts, attempts[1:]):
        recovery += max(0.0, (after["first_step"] or after["alive"]) - before["alive"])
        since = before["checkpointed"] or before["first_step"] or before["alive"]
        lost += max(0.0, before["alive"] - since)
    restarted = [f for f in failures if f["decision"].startswith("restarted")]
    early = [f["time"] for f in restarted if attempts and f["time"] < attempts[0]["start"]]
    if early:  # lost as the group started it: recovered once the attempt that ran got going
        recovery += max(0.0, (attempts[0]["first_step"] or attempts[0]["alive"]) - min(early))
    return {"restarts": max(len(attempts) - 1, len(restarted)), "recovery_s": recovery, "lost_s": lost}


def abort_line_of(sink) -> str | None:
    """The line a trial's (or probe's) worker printed as its allocator aborted the process, if the console passed
    one to its sink (raylab/failure.py); None where there is none, or no sink (a dead cluster: the lost process's own
    error stands)."""
    try:
        return ray.get(sink.abort_line.remote(), timeout=60)
    except Exception:  # noqa: BLE001
        return None
