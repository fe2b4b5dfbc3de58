"""Your own files, streamed, in the default tier: Fashion-MNIST exported to Parquet by `raylab data export` and
trained from the files (torch:none, `--quick`) on the shared local cluster. (docs/data.md's `.npy` shards:
test_streamed_npy.py, full tier.)

The streamed runs of every framework, a label-sorted Parquet file, a lost worker and the image folder's batch
sweep: test_stream.py and test_image_folder.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT, load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 1  # the Parquet trial
SECONDS = 35  # 20 s on 2026-12-06 (the default tier, the 2-core VM)

FASHION = load_recipe("fashion")


def export(recipe: str, out) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raylab", "data", "export", str(ROOT / "recipes" / recipe), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = export("fashion.py", tmp_path)
    assert done.returncode == 2 and "is not empty" in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]  # nothing of the user's lost


def test_an_exported_parquet_trains_streamed(run_recipe, tmp_path):
    out = tmp_path / "fashion-parquet"
    done = export("fashion.py", out)
    assert done.returncode == 0 and f"--data {out}" in done.stdout, done.stderr[-3000:]
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:none", "--data", str(out))
    assert code == 0, summary
    [trial] = summary["trials"]
    run = client.get_run(trial["run_id"])
    params, metrics = run.data.params, run.data.metrics
    assert run.info.status == "FINISHED" and params["data_streamed"] == "True", params
    assert params["train_samples"] == "8192" and params["data"] == "fashion-mnist"  # --quick's first rows
    assert run.data.tags["input"].startswith("streamed") and metrics["input_wait_s"] >= 0
    assert "ray_data_stats.txt" in [a.path for a in client.list_artifacts(trial["run_id"])]
    assert metrics["val_accuracy"] > 0.6, metrics
