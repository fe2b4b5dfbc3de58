"""An image folder, streamed: procedural scenes written as PNG files, one folder per class, read with Ray Data's image
reader, decoded and resized in the pipeline. Here, in the default tier, torch:none trains on it in bf16; in
test_image_folder_sweep.py (full tier) torch and TF at two batch sizes (`--batch 16,32`, the batch sweep) with
per-framework optimizers that differ only in a default, which the parity report catches from what the workers built.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.integration.conftest import load_recipe, shared_run

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # the shared run's
SECONDS = 25  # 16 s on 2026-12-06, 21 s on 2026-12-07 (the default tier, the 2-core VM)

FASHION = load_recipe("fashion")


def _keras_adam(lr):
    import keras

    return keras.optimizers.Adam(learning_rate=5e-4)  # Keras' default epsilon, 1e-7


def _torch_adam(params, lr):
    import torch

    return torch.optim.Adam(params, lr=5e-4)  # torch's default epsilon, 1e-8: not the same optimizer


def image_folder_run(tmp_path_factory, template_db, name: str, starts: int, *args):
    """Procedural scenes written as PNG files, one folder per class (the mask covers more or less than the median,
    from the quarters either side), read with Ray Data's image reader, decoded and resized to 28x28 grey in the
    pipeline; trained as `args` say, with per-framework optimizers that differ only in a default (Adam's epsilon)."""
    from PIL import Image

    from raylab import Native
    from raylab.data.scenes import scenes
    from raylab.data.stream import images

    tmp_path = tmp_path_factory.mktemp("image-folder")
    x, y = scenes(960, seed=7)
    area = y["mask"].mean(axis=(1, 2, 3))
    lo, hi = np.quantile(area, [0.25, 0.75])
    keep = (area < lo) | (area > hi)  # the middle half is dropped: an MLP tells the rest apart in 3 epochs
    x, area = x[keep], area[keep]
    big = area > np.median(area)
    for i, (img, is_big) in enumerate(zip(x, big)):
        split = "train" if i < 384 else "test"
        folder = tmp_path / "scenes" / split / ("big" if is_big else "small")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i}.png")
    stream = images(str(tmp_path / "scenes" / "train"), str(tmp_path / "scenes" / "test"), size=(28, 28), mode="L")
    recipe = FASHION.variant(
        name="scene_images",
        data=stream,
        target_accuracy=None,
        optimizer=Native(tf=_keras_adam, torch=_torch_adam, name="adam-defaults"),
    )
    return shared_run(tmp_path, template_db, name, starts, recipe, "--epochs", "3", *args, seconds=40 * starts)


@pytest.fixture(scope="module")
def image_folder(ray_cluster, tmp_path_factory, template_db):
    return image_folder_run(
        tmp_path_factory,
        template_db,
        "image-folder",
        1,
        "--trials",
        "torch:none",
        "--batch",
        "16",
        "--set",
        "precision=bf16",
    )


def test_the_trial_ran_bf16_as_asked_and_says_so(image_folder):
    """The default tier's bf16 trial (torch autocast on this CPU; every framework's, and torch_xla's recorded
    fallback to fp32: test_bf16.py and test_bf16_tf_jax.py, full tier)."""
    assert image_folder.code == 0, image_folder.tail()
    [trial] = image_folder.summary["trials"]
    run = image_folder.client.get_run(trial["run_id"])
    assert run.data.params["precision"] == "bf16" and run.data.tags["precision_applied"] == "bf16", run.data.tags
    assert "precision: bf16" in image_folder.out


def test_an_image_folder_of_scenes_trains_streamed(image_folder):
    code, summary, client = image_folder.code, image_folder.summary, image_folder.client
    assert code == 0, image_folder.tail()
    for trial in summary["trials"]:
        run = client.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", trial
        assert run.data.params["train_samples"] == "384" and run.data.params["test_samples"] == "96"
        if run.data.params["batch_per_replica"] == "16":  # the size this test always trained at; 32 is the sweep's
            # two classes, told apart from the images: 0.69 to 0.82 over 16 seeds of a plain torch loop (0.55 to
            # 0.75 with the middle half kept and 2 epochs, where CI once saw 0.5)
            assert run.data.metrics["val_accuracy"] > 0.6, (trial["trial"], run.data.metrics)
        assert [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")] == [1, 2, 3]
