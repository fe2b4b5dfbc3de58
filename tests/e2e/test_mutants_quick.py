"""The quick group's mutants (door and unit tests, seconds each): each applied to a scratch copy,
its row's test must fail (tests/mutants.py runs them; tests/mutant_list.py lists them). Full tier: a group a file,
so each fits a slice."""

from __future__ import annotations

import pytest

from tests import mutants

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 6  # the Ray Train runs its mutants' tests start, at most (a mutant may start one more)
SECONDS = 360  # measured 300 s, 180 of them a hung test since given a 120 s timeout (2026-12-06)


def test_every_quick_mutant_is_caught_by_its_rows_test():
    mutants.assert_caught("quick")
