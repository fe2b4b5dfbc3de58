"""Rebalances the full tier's slices on purpose: collects the real tree (`--full`), balances every full-only file
afresh by its declared seconds (tests/tiers.py slices, nothing pinned) and writes tests/slices.txt. Commit the file
in a commit that says the slices were rebalanced: until then each file keeps its slice, so that every full-only
test runs in CI once in any K landings in a row.

    .venv/bin/python -m tests.pin_slices
"""

from __future__ import annotations

import sys

import pytest

from tests import tiers


class Pin:
    def pytest_collection_finish(self, session):
        only = [item for item in session.items if tiers.tier_of(item) == "full"]
        where = tiers.slices(only, tiers.SLICES, pinned={})
        tiers.write_pins(where, tiers.SLICES)
        print(f"wrote {tiers.PINS}: {len(where)} files in {tiers.SLICES} slices")


if __name__ == "__main__":
    sys.exit(
        pytest.main(
            ["--full", "--collect-only", "-q", "-p", "no:cacheprovider", str(tiers.ROOT / "tests")], plugins=[Pin()]
        )
    )
