"""The suite's tiers and budget as declared (tests/tiers.py): every test file says its tier, seconds and start-ups;
the default tier fits its budget on paper before it runs; the full tier's slices cover each full-only file once,
balanced, with the files that share a package-scoped run kept together."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests import tiers

TESTS = Path(__file__).resolve().parents[1]
SHARED_ACROSS_FILES = ("lost_workers", "lost_tf_ps")  # tests/integration/conftest.py's package-scoped runs


def declared(path: Path) -> dict:
    """A test file's module-level TIER, SECONDS and RAY_TRAIN_STARTS, and the names its functions take."""
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("TIER", "SECONDS", "RAY_TRAIN_STARTS", "STARTS_VARY"):
                out[name] = ast.literal_eval(node.value)
    out["asks"] = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}  # the fixtures its functions ask for
    return out


FILES = {
    str(p.relative_to(TESTS.parent)): declared(p) for p in sorted(TESTS.glob("*/test_*.py")) if p.parent.name != "unit"
}


@pytest.mark.parametrize("path", sorted(FILES))
def test_every_test_file_declares_its_tier_seconds_and_start_ups(path):
    d = FILES[path]
    assert d.get("TIER", "default") in ("default", "full"), (path, d.get("TIER"))
    assert isinstance(d.get("SECONDS"), int) and d["SECONDS"] > 0, f"{path}: SECONDS = its seconds here, measured"
    assert isinstance(d.get("RAY_TRAIN_STARTS"), int), f"{path}: RAY_TRAIN_STARTS = N (tests/startups.py)"


def test_the_default_tier_fits_its_budget_in_seconds_as_declared():
    """On paper, before it runs (the run's own table holds the start-ups, shared runs' included)."""
    import tests.unit

    default = {p: d for p, d in FILES.items() if d.get("TIER", "default") == "default"}
    seconds = sum(d["SECONDS"] for d in default.values()) + tests.unit.SECONDS
    assert seconds <= tiers.DEFAULT.seconds, f"the default tier declares {seconds:.0f} s"
    assert sum(d["RAY_TRAIN_STARTS"] for d in default.values()) <= tiers.DEFAULT.starts
    # a run the full tier's files share is not the default tier's: it would be paid there in full
    assert not [p for p, d in default.items() if d["asks"] & set(SHARED_ACROSS_FILES)]


@dataclass
class FixtureDef:
    scope: str


@dataclass
class Info:
    name2fixturedefs: dict = field(default_factory=dict)


@dataclass
class Module:
    SECONDS: float


@dataclass
class Item:
    """What tests/tiers.py reads of a pytest item: its node id, module and fixtures."""

    nodeid: str
    module: Module
    _fixtureinfo: Info


def item(path: str, seconds: float, *package: str) -> Item:
    defs = {name: [FixtureDef("package")] for name in package}
    defs["ray_cluster"] = [FixtureDef("package")]  # every integration file's: a cluster, not a shared run
    defs["tmp_path"] = [FixtureDef("function")]
    return Item(f"{path}::test", Module(seconds), Info(defs))


def test_slices_cover_each_file_once_balanced_and_keep_a_shared_run_in_one():
    items = [
        item("a.py", 400, "lost_workers"),
        item("b.py", 100, "lost_workers", "lost_tf_ps"),
        item("c.py", 50, "lost_tf_ps"),
        item("d.py", 300),
        item("e.py", 280),
        item("f.py", 20),
        item("f.py", 20),
    ]
    where = tiers.slices(items, 3, pinned={})
    assert set(where) == {"a.py", "b.py", "c.py", "d.py", "e.py", "f.py"} and set(where.values()) == {1, 2, 3}
    assert where["a.py"] == where["b.py"] == where["c.py"]  # one run shared, one slice
    load = {
        i: sum(
            {"a.py": 400, "b.py": 100, "c.py": 50, "d.py": 300, "e.py": 280, "f.py": 20}[p]
            for p, s in where.items()
            if s == i
        )
        for i in (1, 2, 3)
    }
    assert sorted(load.values()) == [300, 300, 550], load  # the longest first, each to the lightest slice
    assert tiers.slices(items, 3, pinned={}) == where  # the same every time: the same files on every machine


def test_a_pinned_file_keeps_its_slice_when_declarations_change_and_a_new_file_goes_to_the_lightest(tmp_path):
    """tests/slices.txt: a declaration that changes moves nothing (every full-only test runs in CI once in any K
    landings); a new file joins the slice lightest by declared seconds; a run shared follows its pinned file."""
    items = [item("a.py", 400), item("b.py", 100), item("c.py", 50), item("d.py", 300)]
    where = tiers.slices(items, 2, pinned={})
    tiers.write_pins(where, 2, tmp_path / "slices.txt")
    pins = tiers.read_pins(2, tmp_path / "slices.txt")
    assert pins == where and tiers.read_pins(3, tmp_path / "slices.txt") == {}  # pinned for another K: none
    grown = [item("a.py", 40), item("b.py", 900), item("c.py", 50), item("d.py", 300)]
    assert tiers.slices(grown, 2, pinned=pins) == where  # re-declared: no file moves
    assert tiers.slices(grown, 2, pinned={}) != where  # unpinned, the balance would have moved them
    new = items + [item("e.py", 10), item("f.py", 5, "lost_workers"), item("c.py", 50, "lost_workers")]
    placed = tiers.slices(new, 2, pinned=pins)
    load = {
        i: sum(s for p, s in (("a.py", 400), ("b.py", 100), ("c.py", 50), ("d.py", 300)) if where[p] == i)
        for i in (1, 2)
    }
    assert placed["e.py"] == min(load, key=load.get) and placed["f.py"] == placed["c.py"] == where["c.py"]


def test_a_slice_is_asked_for_as_i_of_k():
    assert tiers.parse_slice("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(ValueError, match="--slice"):
            tiers.parse_slice(bad)


@pytest.fixture
def budget_state(monkeypatch):
    """tests/startups.py's declarations and readings, emptied for one test and restored after."""
    from tests import startups

    for name in ("DECLARED", "VARIES", "NEEDED"):
        monkeypatch.setattr(startups, name, {})
    return startups


def test_a_search_is_held_to_the_start_ups_its_run_needed_not_to_its_bound(budget_state):
    """A file whose start-ups a search decides declares the most it can reach; what its run needed, read from what
    it recorded, is what it is held to: one start-up more fails, as many passes on any machine."""
    startups, path = budget_state, "tests/integration/test_batch_max_tf_jax.py"
    startups.DECLARED[path], startups.VARIES[path] = 22, "the --batch max search's probes"
    startups.NEEDED[path] = [(5, "tf:none x1: 4 probes and the trial"), (6, "jax:none x1: 5 probes and the trial")]
    assert startups.allowed(path) == 11
    assert startups.over_budget({path: 11}) == []  # what the search needed here: passes, whatever the bound
    assert startups.over_budget({path: 8}) == []
    over = startups.over_budget({path: 12})  # one Ray Train run more than the search needed
    assert over == [
        f"{path}: 12 start-ups, but its runs needed 11 (tf:none x1: 4 probes and the trial; "
        "jax:none x1: 5 probes and the trial)"
    ], over
    assert startups.over_budget({path: 23}) == [f"{path}: 23 start-ups, declares 22"]  # past the bound, read or not

    ledger = tiers.Ledger()
    ledger.add_report(type("Report", (), {"nodeid": f"{path}::test", "duration": 100.0})())
    lines, _, _ = tiers.table(ledger, {path: 12}, startups.DECLARED, None, "a slice", needed={path: 11})
    row = next(line for line in lines if line.startswith(path))
    assert "11 of 22" in row and "OVER: 12 start-ups, its runs needed 11" in row, row
    lines, _, _ = tiers.table(ledger, {path: 11}, startups.DECLARED, None, "a slice", needed={path: 11})
    assert "OVER" not in next(line for line in lines if line.startswith(path))


def test_a_file_whose_start_ups_vary_must_read_them_and_a_fixed_one_is_held_to_its_declaration(budget_state):
    startups = budget_state
    startups.DECLARED.update({"a.py": 4, "b.py": 10})
    startups.VARIES["b.py"] = "a search"
    assert startups.over_budget({"a.py": 4}) == []
    assert startups.over_budget({"a.py": 5}) == ["a.py: 5 start-ups, declares 4"]
    assert startups.over_budget({"c.py": 1}) == ["c.py: 1 start-ups, declares none (RAY_TRAIN_STARTS)"]
    # it says its start-ups vary, started some, and no test read what its run needed: not held to anything, so failed
    assert startups.over_budget({"b.py": 3}) == [
        "b.py: 3 start-ups, and its start-ups vary (a search) but no test "
        "read what its run needed (tests/startups.py `needed`)"
    ]
