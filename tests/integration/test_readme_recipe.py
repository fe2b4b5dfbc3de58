"""docs/recipes.md "Write your own recipe" example, verbatim: its file and its command run on a real local Ray cluster.

The recipe is taken from docs/recipes.md as written (the fenced block after the line naming `my_regression.py`),
saved as my_regression.py and run through the real command line with the arguments of the command that names
`--trials` (its distributed kinds; the page's `--quick` command runs in tests/e2e/test_readme.py), so the docs
cannot drift from what works.
"""

from __future__ import annotations

import importlib.util
import math
import re
import shlex

import numpy as np
import pytest

from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 4  # the four trials docs/recipes.md says its command runs
SECONDS = 130

FILE = "my_regression.py"
# Every trial docs/recipes.md says the command runs.
REQUIRED = {"tf:none x1", "tf:mwms x2", "torch:ddp x2", "xla:single x1"}


def readme_recipe() -> tuple[str, list[str]]:
    """(the recipe file's code, the arguments of the command that runs it), as docs/recipes.md has them."""
    lines = (ROOT / "docs" / "recipes.md").read_text().splitlines()
    code, fence, start = None, False, None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
            continue
        if not fence and FILE in line and code is None:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j].strip() == "```python":
                end = next((k for k in range(j + 1, len(lines)) if lines[k].startswith("```")), None)
                assert end is not None, f"docs/recipes.md: the python block after line {i + 1} ({FILE}) is not closed"
                code, start = "\n".join(lines[j + 1 : end]) + "\n", end + 1
    assert code is not None, (
        f"docs/recipes.md has no ```python block right after a line naming {FILE} (the 'Write your own recipe' section)"
    )
    command = re.compile(rf"(?:^|[\s/])python3?\s+{re.escape(FILE)}(?P<args>(?:\s.*)?)$")
    fence = False
    for line in lines[start:]:
        if line.startswith("```"):
            fence = not fence
            continue
        found = command.search(line.strip()) if fence else None
        if found and "--trials" in found["args"]:  # the first, `--quick`, runs in tests/e2e/test_readme.py
            return code, shlex.split(found["args"], comments=True)
    raise AssertionError(
        f"docs/recipes.md has no command line `python {FILE} --trials ...` in a fenced block after the recipe"
    )


def load(path):
    spec = importlib.util.spec_from_file_location("readme_my_regression", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


def test_readme_recipe_runs_as_written(run_recipe, tmp_path, capsys):
    from raylab.data import as_dataset

    code, args = readme_recipe()
    (tmp_path / FILE).write_text(code)
    recipe = load(tmp_path / FILE)
    ds = as_dataset(recipe.data, recipe.name)
    baseline_mae = float(np.mean(np.abs(ds.y_test - ds.y_train.mean())))  # predicting the training mean
    raw_range = f"test inputs float32 in [{float(np.min(ds.x_test)):.4g}, {float(np.max(ds.x_test)):.4g}]"

    exit_code, summary, client = run_recipe(recipe, *args)
    out, err = capsys.readouterr()
    assert exit_code == 0, err[-3000:]
    trials = {t["trial"]: t for t in summary["trials"]}
    assert REQUIRED == set(trials), f"the docs/recipes.md command ran {sorted(trials)}"

    figures, built = [], {}
    for name, t in trials.items():
        assert t["status"] == "FINISHED", name
        run = client.get_run(t["run_id"])
        p, tags = run.data.params, run.data.tags
        losses = [m.value for m in sorted(client.get_metric_history(t["run_id"], "train_loss"), key=lambda m: m.step)]
        assert len(losses) >= 2 and losses[-1] < losses[0], f"{name}: train_loss per epoch {losses}"
        mae = run.data.metrics["val_mean_absolute_error"]
        assert math.isfinite(mae) and mae < baseline_mae, f"{name}: val MAE {mae} vs mean predictor {baseline_mae}"
        assert p["loss"] == "mean_squared_error" and p["optimizer"] == "sgd", name
        assert float(p["opt_momentum"]) == 0.9 and p["schedule"].startswith("cosine"), name
        assert p["preprocess"].startswith("none") and p["metrics"] == "mean_absolute_error", name
        assert tags["built_optimizer"].startswith("sgd(") and "momentum=0.9" in tags["built_optimizer"], name
        assert tags["built_preprocess"].startswith("none") and raw_range in tags["built_preprocess"], (
            f"{name}: {tags['built_preprocess']} (raw data: {raw_range})"
        )  # nothing scaled the inputs
        built.setdefault(t["workers"], set()).add(
            (tags["built_optimizer"], tags["built_lr_schedule"], tags["built_loss"])
        )
        figures.append(
            f"{name}: train_loss {losses[0]:.4f} -> {losses[-1]:.4f}, val MAE {mae:.4f} "
            f"(mean predictor {baseline_mae:.4f})"
        )
    for workers, same in built.items():  # TF and torch built the same task (the schedule's length depends on workers)
        assert len(same) == 1, f"x{workers}: {same}"
    with capsys.disabled():
        print("\n" + "\n".join(figures))
