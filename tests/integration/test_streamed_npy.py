"""docs/data.md's `my_shards.py` (label-sorted `.npy` shards, written by its data function) trained as the page saves
it, on the shared local cluster. (The README test runs the page's command too; an exported Parquet:
test_streamed_files.py.)"""

from __future__ import annotations

import pytest

from tests.door import load_module
from tests.e2e.test_readme import page_blocks
from tests.integration.conftest import ROOT

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 1  # the .npy trial
SECONDS = 25  # 15 s on 2026-12-06, 18 s on 2026-12-07 (the default tier, the 2-core VM)


def test_the_docs_npy_shards_train_streamed_and_shuffled_whole(run_recipe, tmp_path, monkeypatch):
    """docs/data.md's my_shards.py, as the page saves it, with the page's command's --compile off."""
    body = page_blocks((ROOT / "docs" / "data.md").read_text(), every=True)[1]["my_shards.py"]
    (tmp_path / "my_shards.py").write_text(body)
    monkeypatch.chdir(tmp_path)  # its shards go under the working directory, as the page's command writes them
    recipe = load_module(tmp_path / "my_shards.py", "docs_my_shards").RECIPE
    code, summary, client = run_recipe(recipe, "--compile", "off")
    assert code == 0, summary
    [trial] = summary["trials"]
    run = client.get_run(trial["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["data"] == "npy", run.data.params
    assert run.data.params["shuffle"] == "global"  # sorted by label on disk, shuffled whole each pass
    assert run.data.metrics["val_accuracy"] > 0.6, run.data.metrics  # chance: 0.25
