"""Running a matrix's trials at the same time, each on whole nodes no other running trial uses.

With `--concurrency N|auto`, up to N trials run at once (auto: as many as the cluster's nodes allow). A trial
holds whole nodes: it takes free nodes, largest first, until its worker processes fit on them, and its workers
are pinned there (Ray's `ray.io/node-id` label); no other trial is placed on those nodes until it ends, so no
two trials share cores and each trial's timings stay comparable with a trial run alone. Trials start in the
matrix's order (repeats keep their A B B A interleaving); a trial waits for enough free nodes rather than being
overtaken. A plain baseline runs on the driver's machine outside Ray: it holds every node. On a single-node
cluster, or with --concurrency 1, trials run one after another as before, each holding the whole cluster.

Each trial records the nodes it held (`nodes_held`, `node_ids_held`) and the trials it overlapped with
(`overlapped_with`).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Node:
    id: str
    resources: dict  # what Ray says the node has: CPU, GPU, TPU, ...


def cluster_nodes() -> list[Node]:
    """The alive nodes that can run a worker (any CPU), in Ray's order."""
    import ray

    return [Node(n["NodeID"], dict(n["Resources"])) for n in ray.nodes()
            if n.get("Alive") and n["Resources"].get("CPU", 0) > 0]


def slots(node: Node, per_worker: dict) -> int:
    """How many of a trial's worker processes fit on a node."""
    fits = [math.floor(node.resources.get(k, 0) / v + 1e-9) for k, v in per_worker.items() if v > 0]
    return min(fits) if fits else 0


def plan(free: list[Node], workers: int, per_worker: dict) -> list[Node] | None:
    """The fewest free nodes (largest first, then Ray's order) that hold `workers` processes; None if they don't."""
    chosen, room = [], 0
    for node in sorted(free, key=lambda n: -slots(n, per_worker)):
        if room >= workers:
            break
        if slots(node, per_worker) > 0:
            chosen.append(node)
            room += slots(node, per_worker)
    return chosen if room >= workers else None


@dataclass
class Need:
    """What a matrix item needs: `workers` processes of `per_worker` resources, or (whole=True) every node."""

    workers: int = 0
    per_worker: dict = field(default_factory=dict)
    whole: bool = False


class Nodes:
    """The cluster's nodes, each held by at most one running trial; at most `limit` trials at a time."""

    def __init__(self, nodes: list[Node], limit: int | None):
        self.nodes, self.limit = nodes, limit
        self.held: dict[str, str] = {}  # node id -> the trial holding it
        self.running = 0
        self.cond = threading.Condition()

    def choose(self, need: Need) -> list[Node] | None:
        """The nodes the item would hold now, or None if it has to wait."""
        if self.limit is not None and self.running >= self.limit:
            return None
        free = [n for n in self.nodes if n.id not in self.held]
        if need.whole:
            return free if len(free) == len(self.nodes) else None
        chosen = plan(free, need.workers, need.per_worker)
        if chosen is None and plan(self.nodes, need.workers, need.per_worker) is None:
            # Its workers fit on no set of whole nodes (e.g. one worker wider than any node): it runs alone.
            return free if len(free) == len(self.nodes) else None
        return chosen

    def take(self, need: Need, label: str, timeout_s: float | None = None) -> list[Node]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            while (chosen := self.choose(need)) is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"{label}: no free nodes after {timeout_s}s")
                self.cond.wait(timeout=min(left, 1.0) if left is not None else 1.0)
            for n in chosen:
                self.held[n.id] = label
            self.running += 1
            return chosen

    def give(self, nodes: list[Node]) -> None:
        with self.cond:
            for n in nodes:
                self.held.pop(n.id, None)
            self.running -= 1
            self.cond.notify_all()


def concurrency_limit(asked: int | None, nodes: list[Node]) -> int:
    """Trials at once: --concurrency N (None = auto: one per node), never more than the nodes."""
    return max(1, min(asked or len(nodes), len(nodes)))


def label_selector(nodes: list[Node]) -> dict:
    """Ray Train's label selector that keeps a trial's workers on the nodes it holds."""
    from ray.util.placement_group import NODE_ID_LABEL_KEY

    return {NODE_ID_LABEL_KEY: f"in({','.join(n.id for n in nodes)})"}


def overlaps(spans: dict[str, tuple[float, float]]) -> dict[str, list[str]]:
    """For each item's (start, end): the other items whose span overlapped it, in start order."""
    out = {}
    for name, (a0, a1) in spans.items():
        out[name] = [other for other, (b0, b1) in sorted(spans.items(), key=lambda kv: kv[1][0])
                     if other != name and a0 < b1 and b0 < a1]
    return out
