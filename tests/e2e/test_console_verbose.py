"""--verbose on a terminal: the others' output (Ray's, the frameworks') shown live beside raylab's lines
(test_console.py's recipe, one trial broken on purpose; the quiet console: test_console.py; both full tier)."""

from __future__ import annotations

import re

import pytest

from tests.e2e.test_console import on_a_terminal, write_recipe

pytestmark = pytest.mark.e2e
TIER = "full"
RAY_TRAIN_STARTS = 1  # the verbose run's one trial
SECONDS = 40


@pytest.fixture
def recipe(tmp_path):
    return write_recipe(tmp_path)


def test_verbose_console_shows_the_others_output(recipe, tmp_path):
    code, lines = on_a_terminal(
        [str(recipe), "--quick", "--compile", "off", "--trials", "torch:none", "--verbose"], tmp_path
    )
    shown = "\n".join(lines)
    assert code == 1, shown[-3000:]
    assert re.search(r"\(TrainController pid=\d+", shown), shown[-3000:]
    assert "broken on purpose" in shown
