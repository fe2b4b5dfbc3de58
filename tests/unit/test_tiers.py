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
            if name in ("TIER", "SECONDS", "RAY_TRAIN_STARTS"):
                out[name] = ast.literal_eval(node.value)
    out["asks"] = {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}  # the fixtures its functions ask for
    return out


FILES = {str(p.relative_to(TESTS.parent)): declared(p) for p in sorted(TESTS.glob("*/test_*.py"))
         if p.parent.name != "unit"}


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
    items = [item("a.py", 400, "lost_workers"), item("b.py", 100, "lost_workers", "lost_tf_ps"),
             item("c.py", 50, "lost_tf_ps"), item("d.py", 300), item("e.py", 280), item("f.py", 20), item("f.py", 20)]
    where = tiers.slices(items, 3)
    assert set(where) == {"a.py", "b.py", "c.py", "d.py", "e.py", "f.py"} and set(where.values()) == {1, 2, 3}
    assert where["a.py"] == where["b.py"] == where["c.py"]  # one run shared, one slice
    load = {i: sum({"a.py": 400, "b.py": 100, "c.py": 50, "d.py": 300, "e.py": 280, "f.py": 20}[p]
                   for p, s in where.items() if s == i) for i in (1, 2, 3)}
    assert sorted(load.values()) == [300, 300, 550], load  # the longest first, each to the lightest slice
    assert tiers.slices(items, 3) == where  # the same every time: a slice names the same files on every machine


def test_a_slice_is_asked_for_as_i_of_k():
    assert tiers.parse_slice("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b"):
        with pytest.raises(ValueError, match="--slice"):
            tiers.parse_slice(bad)
