"""The matrix group's mutants (the fashion matrix, about 4.5 minutes each): each applied to a scratch copy,
its row's test must fail (tests/mutants.py runs them; tests/mutant_list.py lists them). Full tier: a group a file,
so each fits a slice."""

from __future__ import annotations

import pytest

from tests import mutants

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 22  # the Ray Train runs its mutants' tests start, at most (a mutant may start one more)
SECONDS = 700  # measured 549 s (2026-12-06, the 2-core VM)


def test_every_matrix_mutant_is_caught_by_its_rows_test():
    mutants.assert_caught("matrix")
