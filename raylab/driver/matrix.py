"""Running a matrix's trials at the same time, each on whole nodes no other running trial uses.

With `--concurrency N|auto`, up to N trials run at once (auto: as many as the cluster's nodes allow). A trial
holds whole nodes: it takes free nodes, largest first, until its worker processes fit on them, and its workers
are pinned there (Ray's `ray.io/node-id` label); no other trial is placed on those nodes until it ends, so no
two trials share cores and each trial's timings stay comparable with a trial run alone. Trials start in the
matrix's order (repeats keep their A B B A interleaving); a trial waits for enough free nodes rather than being
overtaken. A plain script runs on the driver's machine outside Ray: it holds every node. On a single-node
cluster, or with --concurrency 1, trials run one after another as before, each holding the whole cluster.

Each trial records the nodes it held (`nodes_held`, `node_ids_held`) and the trials it overlapped with
(`overlapped_with`).

`Matrix` runs the items of a schedule (trials and plain scripts; what runs one item is handed to it), each
in a thread of its own when trials run at once; on Ctrl-C / SIGTERM the runs still open end KILLED.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from raylab.driver.outcome import INTERRUPTED, INTERRUPTS, TrialOutcome

if TYPE_CHECKING:
    from raylab.config import Settings, TrialSpec
    from raylab.record.tracking import Tracker


@dataclass
class Node:
    id: str
    resources: dict  # what Ray says the node has: CPU, GPU, TPU, ...


def cluster_nodes() -> list[Node]:
    """The alive nodes that can run a worker (any CPU), in Ray's order."""
    import ray

    return [
        Node(n["NodeID"], dict(n["Resources"]))
        for n in ray.nodes()
        if n.get("Alive") and n["Resources"].get("CPU", 0) > 0
    ]


def slots(node: Node, per_worker: dict) -> int:
    """How many of a trial's worker processes fit on a node."""
    fits = [math.floor(node.resources.get(k, 0) / v + 1e-9) for k, v in per_worker.items() if v > 0]
    return min(fits) if fits else 0


def spare(node: Node, per_worker: dict) -> bool:
    """Whether the node has accelerators (GPUs, TPUs, an accelerator type) that a trial needing `per_worker` leaves
    idle: such a trial goes elsewhere where it can, so a CPU trial does not hold (and pay for) a GPU node."""
    return any(
        v > 0 and not per_worker.get(k)
        for k, v in node.resources.items()
        if k in ("GPU", "TPU") or k.startswith("accelerator_type:")
    )


def plan(free: list[Node], workers: int, per_worker: dict) -> list[Node] | None:
    """The fewest free nodes (those without accelerators it leaves idle first, then largest first, then Ray's
    order) that hold `workers` processes; None if they don't."""
    chosen, room = [], 0
    for node in sorted(free, key=lambda n: (spare(n, per_worker), -slots(n, per_worker))):
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
        out[name] = [
            other
            for other, (b0, b1) in sorted(spans.items(), key=lambda kv: kv[1][0])
            if other != name and a0 < b1 and b0 < a1
        ]
    return out


def schedule(cfg: Settings, plain: list[TrialSpec]) -> list[tuple[int, TrialSpec]]:
    """(repeat, trial spec or plain script's spec) in run order.

    Repeats are interleaved (A B A B ...), every other repeat in reverse (A B B A), so drift on a
    shared machine falls on every trial alike; the plain scripts sit beside the trials.
    """
    order = []
    for r in range(1, cfg.repeats + 1):
        one = [*cfg.trials, *plain]
        order += [(r, item) for item in (one if r % 2 else one[::-1])]
    return order


def item_key(item: TrialSpec, repeat: int) -> str:
    """A matrix item's key, kept as the tag raylab.trial_key: what --resume matches runs by."""
    return f"{item.name}#{repeat}"


# Runs one matrix item: (repeat, item, key, the nodes it holds or None, started) -> its outcome. `started` is told
# the outcome once its run exists, so an interrupt can end the run KILLED.
RunItem = Callable[[int, "TrialSpec", str, "list[Node] | None", Callable[[TrialOutcome], None]], TrialOutcome]


class Matrix:
    """The matrix's items as they run: which next, on which nodes, in which thread; what each held and when."""

    def __init__(self, nodes: list[Node], limit: int, run_item: RunItem, need: Callable[[TrialSpec], Need]):
        self.nodes, self.limit, self.run_item, self.need = nodes, limit, run_item, need
        self.free = Nodes(nodes, limit)
        self.outcomes: list[TrialOutcome | None] = []  # in schedule order; None while an item runs
        self.spans: dict[int, tuple[float, float]] = {}  # outcome index -> (start, end) wall time
        self.holding: dict[int, list[Node]] = {}  # outcome index -> the nodes it held
        self.active: list[TrialOutcome] = []  # items whose runs are open (they end KILLED on an interrupt)
        self.errors: list[BaseException] = []  # what an item's thread raised (an interrupt, a driver error)
        self.threads: list[threading.Thread] = []

    def run(self, order: list[tuple[int, TrialSpec]], finished: dict[str, TrialOutcome], tracker: Tracker) -> None:
        """Runs each item of `order` not `finished` before (--resume), then waits for them all; on an interrupt
        the runs still open end KILLED and the interrupt goes on up."""
        try:
            for repeat, item in order:
                key = item_key(item, repeat)
                if key in finished:
                    self.outcomes.append(finished[key])
                    continue
                taken = self.free.take(self.need(item), item.name)
                if self.errors:
                    self.free.give(taken)
                    break
                self.start(repeat, item, key, taken)
            self.wait()
        except INTERRUPTS:
            INTERRUPTED.set()  # trials still running end KILLED, not FAILED, when the cluster goes
            for o in list(self.active):
                tracker.end(o.run_id, "KILLED", "interrupted (Ctrl-C or SIGTERM)")
            raise

    def start(self, repeat: int, item: TrialSpec, key: str, taken: list[Node]) -> None:
        index = len(self.outcomes)
        self.outcomes.append(None)
        # One at a time, it has the whole cluster; but a trial of a hardware sweep holds (and pays for) its own nodes
        self.holding[index] = taken if self.limit > 1 or item.hardware else self.nodes
        if self.limit == 1:  # one at a time, in this thread, as always
            self.one(index, repeat, item, key, taken)
            return
        t = threading.Thread(
            target=self.one, args=(index, repeat, item, key, taken), daemon=True, name=f"raylab-trial-{index}"
        )
        t.start()
        self.threads.append(t)

    def one(self, index: int, repeat: int, item: TrialSpec, key: str, taken: list[Node]) -> None:
        t0, mine = time.time(), []
        try:
            nodes = taken if self.limit > 1 or item.hardware else None  # its workers are pinned there
            self.outcomes[index] = self.run_item(repeat, item, key, nodes, functools.partial(self.opened, mine))
        except BaseException as e:  # noqa: BLE001 - an interrupt or a driver error: the main thread re-raises
            self.errors.append(e)
        finally:
            self.spans[index] = (t0, time.time())
            for o in mine:  # its run has ended (recorded() always ends it): not ended again on an interrupt
                self.active.remove(o)
            self.free.give(taken)

    def opened(self, mine: list[TrialOutcome], outcome: TrialOutcome) -> None:
        mine.append(outcome)
        self.active.append(outcome)

    def wait(self) -> None:
        for t in self.threads:
            while t.is_alive():
                t.join(timeout=1.0)
        if self.errors:
            raise self.errors[0]

    def done(self) -> list[TrialOutcome]:
        """The outcomes of the items that ran or had finished before, in schedule order."""
        return [o for o in self.outcomes if o is not None]

    def record_overlaps(
        self, tracker: Tracker, repeats: int, shared: bool = False, prices: dict | None = None, simulated: bool = False
    ) -> None:
        """Each trial's nodes held and the trials it overlapped with (tags), and its node count (metric). shared:
        the nodes are one machine's, so trials that overlapped shared its cores (tag shared_machine=true). prices
        (--prices): what each trial cost on them (raylab/record/prices.py; simulated: the nodes are one machine's,
        priced as what they stand for). node_types: each held node's accelerator
        type, else cpu: the hardware it ran on, where a --device sweep asked for a type."""
        from raylab.record.prices import cost, node_type

        names = {
            i: o.spec.name if repeats == 1 else f"{o.spec.name}#{o.repeat}"
            for i, o in enumerate(self.outcomes)
            if o is not None and i in self.spans
        }
        overlapped = overlaps({names[i]: self.spans[i] for i in names})
        for i, name in names.items():
            o, taken, (t0, t1) = self.outcomes[i], self.holding.get(i, []), self.spans[i]
            with_ = overlapped[name]
            o.result.update({"nodes_held": len(taken), "overlapped_with": ",".join(with_)})
            tracker.set_tags(
                o.run_id,
                {
                    "node_ids_held": ",".join(n.id[:12] for n in taken),
                    "node_types": ",".join(node_type(n.resources) for n in taken),
                    "overlapped_with": ",".join(with_) or "none",
                    **({"shared_machine": "true"} if shared and with_ else {}),
                    "trial_started": f"{t0:.3f}",
                    "trial_ended": f"{t1:.3f}",
                },
            )
            spent, said = (
                cost(prices, [n.resources for n in taken], o.result, simulated=simulated)
                if prices and "wall_s" in o.result
                else ({}, {})
            )
            o.result.update(spent)
            if said:
                tracker.set_tags(o.run_id, said)
            tracker.log_metrics(o.run_id, {"nodes_held": len(taken), **spent}, step=0)
