"""Node-exclusive placement of concurrent trials (raylab/driver/matrix.py): which nodes a trial holds, when it waits."""

from __future__ import annotations

import threading

import pytest

from raylab.driver.matrix import Need, Node, Nodes, concurrency_limit, label_selector, overlaps, plan, slots


def nodes(*cpus, gpus=None):
    return [Node(f"n{i}", {"CPU": c, **({"GPU": gpus[i]} if gpus else {})}) for i, c in enumerate(cpus)]


def test_a_trial_takes_the_fewest_whole_nodes_that_hold_its_workers():
    assert [n.id for n in plan(nodes(1, 1, 1), 1, {"CPU": 1})] == ["n0"]
    assert [n.id for n in plan(nodes(1, 4, 2), 3, {"CPU": 1})] == ["n1"]  # largest first
    assert [n.id for n in plan(nodes(1, 1, 1), 2, {"CPU": 1})] == ["n0", "n1"]
    assert plan(nodes(1, 1), 3, {"CPU": 1}) is None
    assert slots(Node("x", {"CPU": 2}), {"CPU": 0.5}) == 4  # oversubscribed ps processes: fractional CPUs
    assert plan(nodes(4, 4, gpus=[0, 1]), 1, {"CPU": 1, "GPU": 1})[0].id == "n1"


def test_trials_never_share_a_node_and_wait_for_free_ones():
    held = Nodes(nodes(1, 1), limit=None)
    a = held.take(Need(1, {"CPU": 1}), "a")
    b = held.take(Need(1, {"CPU": 1}), "b")
    assert {n.id for n in a}.isdisjoint(n.id for n in b)
    with pytest.raises(TimeoutError):  # both nodes held: the third waits
        held.take(Need(1, {"CPU": 1}), "c", timeout_s=0.2)
    got = []
    waiter = threading.Thread(target=lambda: got.append(held.take(Need(1, {"CPU": 1}), "c", timeout_s=10)))
    waiter.start()
    held.give(a)
    waiter.join(timeout=10)
    assert [n.id for n in got[0]] == [n.id for n in a]


def test_a_plain_script_and_a_too_wide_trial_hold_every_node():
    held = Nodes(nodes(1, 1), limit=None)
    a = held.take(Need(1, {"CPU": 1}), "a")
    with pytest.raises(TimeoutError):
        held.take(Need(whole=True), "plain", timeout_s=0.2)
    held.give(a)
    assert len(held.take(Need(whole=True), "plain", timeout_s=1)) == 2
    wide = Nodes(nodes(1, 1), limit=None)  # a 2-CPU worker fits on no single node: it runs alone, unpinned
    assert len(wide.take(Need(1, {"CPU": 2}), "wide", timeout_s=1)) == 2


def test_the_limit_caps_trials_at_once():
    held = Nodes(nodes(1, 1, 1), limit=2)
    held.take(Need(1, {"CPU": 1}), "a")
    held.take(Need(1, {"CPU": 1}), "b")
    with pytest.raises(TimeoutError):
        held.take(Need(1, {"CPU": 1}), "c", timeout_s=0.2)
    assert concurrency_limit(None, nodes(1, 1, 1)) == 3  # auto: one per node
    assert concurrency_limit(8, nodes(1, 1)) == 2
    assert concurrency_limit(None, nodes(2)) == 1  # a single node: one at a time, as before


def test_overlaps_and_the_label_selector():
    spans = {"a": (0, 10), "b": (5, 15), "c": (15, 20), "d": (0, 1)}
    assert overlaps(spans) == {"a": ["d", "b"], "b": ["a"], "c": [], "d": ["a"]}
    assert label_selector(nodes(1, 1)) == {"ray.io/node-id": "in(n0,n1)"}
