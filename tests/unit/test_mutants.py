"""The mutant list (tests/mutant_list.py) against the capability table it serves: every row has a mutant, each
mutant's test is named in its row's default-tier column and its text is still in its file once (the full tier runs
them: tests/e2e/test_mutants_*.py)."""

from __future__ import annotations

from pathlib import Path

from tests import mutants

ROOT = Path(__file__).resolve().parents[2]


def capability_rows() -> list[list[str]]:
    lines = (ROOT / "docs" / "testing.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| capability | default-tier test |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_every_capability_row_names_the_mutants_its_default_tier_test_catches():
    rows = capability_rows()
    assert len(rows) >= 30 and all(len(r) == 4 for r in rows)
    for capability, default, _, named in rows:
        ours = [m for m in mutants.MUTANTS if capability.startswith(m.row)]
        assert ours, f"no mutant for the row '{capability[:60]}'"
        assert named == ", ".join(f"`{m.name}`" for m in ours), capability[:60]
        for m in ours:
            assert m.test.removeprefix("tests/").split("::")[0] in default, (m.name, default)
    every = {m.name for r in rows for m in mutants.MUTANTS if r[0].startswith(m.row)}
    assert every == {m.name for m in mutants.MUTANTS}  # none for a row the table no longer has
    assert len({m.name for m in mutants.MUTANTS}) == len(mutants.MUTANTS)


def test_every_mutant_still_applies_and_each_group_has_its_full_tier_file():
    assert [f"{m.name}: {why}" for m in mutants.MUTANTS if (why := mutants.stale(m))] == []
    for group in mutants.GROUPS:
        assert (ROOT / "tests" / "e2e" / f"test_mutants_{group}.py").is_file(), group
        assert any(m.group == group for m in mutants.MUTANTS), group
