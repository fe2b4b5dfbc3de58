"""An image folder, streamed, at two batch sizes in torch and TF (`--batch 16,32`, the batch sweep), with
per-framework optimizers that differ only in a default (Adam's epsilon), which the parity report catches from what the
workers built (parity: UNFAIR). test_image_folder.py's scenes and its training test, on this run."""

from __future__ import annotations

import re

import pytest

from tests.integration.test_image_folder import image_folder_run
from tests.integration.test_image_folder import test_an_image_folder_of_scenes_trains_streamed  # noqa: F401

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 160


@pytest.fixture(scope="module")
def image_folder(ray_cluster, tmp_path_factory, template_db):
    return image_folder_run(
        tmp_path_factory, template_db, "image-folder-sweep", 4, "--trials", "tf:none,torch:none", "--batch", "16,32"
    )


def test_batch_sweep_groups_and_parity_catches_what_was_built(image_folder):
    """--batch 16,32 runs each trial at both sizes, grouped by batch in the comparison; per-framework optimizers
    that differ only in a default (Adam's epsilon) make the comparison UNFAIR, from what the workers built."""
    summary, client = image_folder.summary, image_folder.client
    assert [t["trial"] for t in summary["trials"]] == [
        "tf:none x1 b16",
        "torch:none x1 b16",
        "tf:none x1 b32",
        "torch:none x1 b32",
    ]
    for trial in summary["trials"]:
        params = client.get_run(trial["run_id"]).data.params
        assert params["batch_per_replica"] == trial["trial"][-2:] == params["global_batch"]
    out = image_folder.out.split("experiment 'scene_images', run")[-1]
    # a row: the trial's name, "!" where it was input-bound (the note under the table says so), then its batch
    table = [
        [word for word in line.split() if word != "!"]
        for line in out.splitlines()
        if line.startswith(("tf:none x1 b", "torch:none x1 b"))
    ][:4]
    assert [(row[0], row[1], row[2]) for row in table] == [
        ("tf:none", "x1", "b16"),
        ("torch:none", "x1", "b16"),
        ("tf:none", "x1", "b32"),
        ("torch:none", "x1", "b32"),
    ]
    assert [row[3] for row in table] == ["16", "16", "32", "32"]  # the batch/replica column
    # (the test inputs' range is the whole test split's, read by each trial's first evaluation: the same in both)
    assert re.search(r"^parity: UNFAIR \(optimizer as built[ ,]", out, re.M), out
    assert "tf:none x1 b16 adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)" in out
    assert "torch:none x1 b16 adam(beta_1=0.9, beta_2=0.999, epsilon=1e-08)" in out
