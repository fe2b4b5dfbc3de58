"""An invocation holds the cluster's nodes against other jobs while it times anything on them.

Two jobs submitted to one `ray start` cluster ran their trials at once on its one node, each at about half its
speed alone, and nothing said so: Ray's accounting had room for both (a warm group's worker reserves a quarter of a
CPU, raylab/driver/groups.py, because the trial that runs is meant to be alone on the machine). So an invocation that
connects to a cluster it did not start takes a hold on each of the cluster's nodes before anything is timed (the
race of --compile best, --batch max's probes, the trials, the plain scripts) and gives it back at its end:

- a hold is a named Ray actor, `raylab-hold-<node id>` in the namespace `raylab-holds`, asking for no resources: Ray
  keeps actor names unique, so a second job's hold on the same node is refused at once, and that job waits, saying
  for what ("waiting for node ..., held by job ...'s invocation ..., trial ... since ..."), and goes on when the first
  job's hold is gone. The actor belongs to the driver: a driver that dies, however it dies, lets go of its holds.
- nodes are taken in one order (their ids sorted), so two jobs never hold one node each while waiting for the other's.
- `--share-nodes` takes no hold: trials then run beside other jobs' and are recorded so (`node_hold`); what ran
  beside each trial is recorded either way (raylab/loop/beside.py), and the parity report says when it was too much.

What it does not stop: work on the cluster that is not raylab's (another framework's job, a user's process on the
node) asks for no hold; that is what the `beside` figures and the verdict are for. A cluster this process started
(the in-process one, without --address) has no other job on it: nothing to hold.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import os
import socket
import time
from dataclasses import dataclass, field

NAMESPACE = "raylab-holds"
POLL_S = 1.0  # how often a waiting job asks again whether the node is free
SAY_EVERY_S = 30.0  # how often it says again what it waits for


def hold_name(node_id: str) -> str:
    return f"raylab-hold-{node_id}"


@functools.cache
def _actor_class():
    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class NodeHold:
        """Who holds a node: the job, the invocation, the trial it times now and since when."""

        def __init__(self, who: dict):
            self.who = dict(who)

        def holder(self) -> dict:
            return self.who

        def now(self, what: dict) -> None:
            self.who.update(what)

    return NodeHold


def holder_line(node: str, who: dict) -> str:
    """'node 10.0.0.5 (1a2b3c4d5e6f), held by job 03000000's invocation fashion 2026-12-06 04:00:00 (root on
    host-a), trial torch:none x1 since 04:00:12'."""
    since = time.strftime("%H:%M:%S", time.localtime(who.get("since", time.time())))
    trial = f", trial {who['trial']}" if who.get("trial") else ""
    invocation = f"'s invocation {who['invocation']}" if who.get("invocation") else ""
    return (
        f"node {node}, held by job {who.get('job', '?')}{invocation} ({who.get('user', '?')} on "
        f"{who.get('host', '?')}){trial} since {since}"
    )


@dataclass
class Hold:
    """The holds this invocation took (none where it shares or owns its cluster), and what it says of them."""

    how: str  # the tag node_hold: "held (...)", "shared (--share-nodes)", "not needed (...)"
    actors: list = field(default_factory=list)
    waited_s: float = 0.0

    def now(self, **what) -> None:
        """Tells whoever waits what this invocation times now (its invocation's name, a trial)."""
        for actor in self.actors:
            actor.now.remote({**what, "since": time.time()})

    def release(self) -> None:
        import ray

        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - the cluster or the actor is gone already: nothing is held
                pass
        self.actors = []


KEPT: list | None = None  # inside kept_until_done: the holds released at its end


@contextlib.contextmanager
def kept_until_done():
    """Inside, an invocation's hold outlives run_recipe until the block ends: a recipe's command compares its trials
    and draws its chart (seconds of CPU) before the next job may start timing on its nodes."""
    global KEPT
    outer, KEPT = KEPT, []
    try:
        yield
    finally:
        for kept in KEPT:
            kept.release()
        KEPT = outer


def release_at_end(hold: Hold) -> None:
    """Releases the hold now, or at the end of the enclosing kept_until_done."""
    if KEPT is None:
        hold.release()
    else:
        KEPT.append(hold)


def take(share: bool, owns: bool, node_ids: list[str], log=print) -> Hold:
    """Holds every node of `node_ids` for this invocation (in sorted order), waiting for another job's hold to end
    and saying so; the Hold says how (the tag node_hold)."""
    if share:
        return Hold("shared (--share-nodes): trials may run beside other jobs' on the same nodes")
    if owns:
        return Hold("not needed: a cluster of this invocation's own, no other job on it")
    import ray

    ctx = ray.get_runtime_context()
    who = {
        "job": ctx.get_job_id(),
        "user": getpass.getuser(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": time.time(),
    }
    hold, began = Hold(""), time.monotonic()
    for node in sorted(node_ids):
        hold.actors.append(_take_one(node, who, log, began))
    hold.waited_s = time.monotonic() - began
    waited = f", after waiting {hold.waited_s:.0f} s for another job" if hold.waited_s >= POLL_S else ""
    hold.how = f"held: {len(node_ids)} node(s) of this invocation's alone while it ran{waited}"
    log(
        f"raylab: holding the cluster's {len(node_ids)} node(s) against other jobs while this invocation runs "
        f"(job {who['job']}; --share-nodes to run beside them)"
    )
    return hold


def _take_one(node: str, who: dict, log, began: float):
    import ray

    NodeHold = _actor_class()
    said = -SAY_EVERY_S
    while True:
        try:
            actor = NodeHold.options(name=hold_name(node), namespace=NAMESPACE).remote(who)
            ray.get(actor.holder.remote(), timeout=60)
            return actor
        except ValueError:  # the name is taken: another job holds the node
            pass
        line = _holder_of(node)
        waited = time.monotonic() - began
        if line is not None and waited - said >= SAY_EVERY_S:
            log(
                f"raylab: waiting for {line}; this job goes on when it ends (--share-nodes: run beside it instead, "
                "recorded as sharing)"
            )
            said = waited
        time.sleep(POLL_S)


def _holder_of(node: str) -> str | None:
    """What holds the node now, said as holder_line does; None where its hold is gone already."""
    import ray

    try:
        other = ray.get_actor(hold_name(node), namespace=NAMESPACE)
        return holder_line(node[:12], ray.get(other.holder.remote(), timeout=10))
    except Exception:  # noqa: BLE001 - gone between the refusal and the question: try again at once
        return None
