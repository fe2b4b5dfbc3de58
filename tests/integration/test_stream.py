"""Streamed data on the shared local cluster: Fashion-MNIST exported to Parquet by `raylab data export` and
trained from those files in every framework, an image folder of procedural scenes, a streamed trial that loses
a worker, and the scenes generator at the seed's size.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.integration.conftest import ROOT, load_recipe
from tests.integration.test_fault_tolerance import children, no_train_workers_left, run_killing

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Fashion-MNIST as Parquet, written by the real command a user runs."""
    out = tmp_path_factory.mktemp("stream") / "fashion-parquet"
    done = subprocess.run([sys.executable, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"),
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"--data {out}" in done.stdout
    return out


def test_export_refuses_a_directory_that_is_not_empty(exported):
    done = subprocess.run([sys.executable, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"),
                           str(exported)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "is not empty" in done.stderr and "Traceback" not in done.stderr


def test_parquet_trains_in_every_framework_like_in_memory(run_recipe, exported):
    """tf:none, tf:mwms x2, torch:ddp x2 and xla:single from the Parquet files, tf:mwms x2 and torch:ddp x2 also
    from memory, same seed and steps: every trial FINISHED, input_wait_s and Ray Data's statistics recorded for
    the streamed ones, test accuracy close to in memory (the 0.01 comparison of every trial on whole epochs is
    bench/stream.py parity's; here 300 steps of batch 64)."""
    steps = ["--epochs", "1", "--steps-per-epoch", "300", "--batch", "64"]
    code, streamed, client = run_recipe(FASHION, "--trials", "tf:none,tf:mwms x2,torch:ddp x2,xla:single", *steps,
                                        "--data", str(exported))
    assert code == 0, streamed
    code, memory, _ = run_recipe(FASHION, "--trials", "tf:mwms x2,torch:ddp x2", *steps)  # one per framework family
    assert code == 0, memory
    accs = {}
    for summary, kind in ((streamed, "streamed"), (memory, "memory")):
        for trial in summary["trials"]:
            run = client.get_run(trial["run_id"])
            assert run.info.status == "FINISHED", trial
            assert run.data.params["data_streamed"] == str(kind == "streamed")
            accs.setdefault(trial["trial"], {})[kind] = run.data.metrics["val_accuracy"]
            if kind == "streamed":
                assert run.data.params["train_samples"] == "60000" and run.data.params["data"] == "fashion-mnist"
                assert run.data.metrics["input_wait_s"] >= 0 and 0 <= run.data.metrics["input_wait_share"] < 1
                assert run.data.tags["input"].startswith("streamed")
                artifacts = [a.path for a in client.list_artifacts(trial["run_id"])]
                assert "ray_data_stats.txt" in artifacts, artifacts
    assert set(accs) == {"tf:none x1", "tf:mwms x2", "torch:ddp x2", "xla:single x1"}, accs
    for trial, acc in accs.items():
        assert acc["streamed"] > 0.75, (trial, acc)
        assert "memory" not in acc or abs(acc["streamed"] - acc["memory"]) < 0.03, (trial, acc)
    two = client.get_run(next(t["run_id"] for t in streamed["trials"] if t["trial"] == "tf:mwms x2"))
    # 2 CPUs, 2 workers: each reserves half a CPU so Ray Data keeps one, and the trial says so.
    assert two.data.params["oversubscribed"] == "True" and two.data.params["data_cpus"] == "1.0"


def test_streamed_trial_survives_a_lost_worker(run_recipe, ray_cluster, exported):
    """torch:ddp x2 streaming from Parquet, a worker SIGKILLed in epoch 2 of 3: FINISHED after a restart,
    every epoch logged once, the batches it read past on resuming recorded."""
    code, summary, client, killer = run_killing(run_recipe, ray_cluster, "RayTrainWorker", 1, "--trials",
                                                "torch:ddp x2", "--epochs", "3", "--steps-per-epoch", "250",
                                                "--checkpoint-every", "0.05", "--data", str(exported))
    assert code == 0, summary
    assert len(killer.killed) == 1, killer.killed
    run = client.get_run(summary["trials"][0]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["restarts"] == 1
    resumed = int(run.data.metrics["resumed_from_step"])
    assert resumed >= 250
    assert run.data.metrics["stream_skipped_batches"] == resumed % 250, run.data.metrics
    for key in ("val_accuracy", "epoch_time_s", "epoch_input_wait_s"):
        steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
        assert sorted(steps) == [1, 2, 3], (key, steps)
    assert children(client, summary["parent_run_id"])[0].info.status == "FINISHED"
    assert no_train_workers_left()


def test_image_folder_of_scenes_trains_in_torch_and_tf(run_recipe, tmp_path):
    """Procedural scenes written as PNG files, one folder per class (the mask covers more or less than the
    median), read with Ray Data's image reader, decoded and resized to 28x28 grey in the pipeline."""
    from PIL import Image

    from raylab.scenes import scenes
    from raylab.stream import images

    x, y = scenes(480, seed=7)
    area = y["mask"].mean(axis=(1, 2, 3))
    big = area > np.median(area)
    for i, (img, is_big) in enumerate(zip(x, big)):
        split = "train" if i < 384 else "test"
        folder = tmp_path / "scenes" / split / ("big" if is_big else "small")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((img * 255).astype(np.uint8)).save(folder / f"{i}.png")
    stream = images(str(tmp_path / "scenes" / "train"), str(tmp_path / "scenes" / "test"), size=(28, 28), mode="L")
    recipe = FASHION.variant(name="scene_images", data=stream, target_accuracy=None)
    code, summary, client = run_recipe(recipe, "--trials", "torch:none,tf:none", "--epochs", "2", "--batch", "16")
    assert code == 0, summary
    for trial in summary["trials"]:
        run = client.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", trial
        assert run.data.params["train_samples"] == "384" and run.data.params["test_samples"] == "96"
        assert run.data.metrics["val_accuracy"] > 0.5  # two classes, told apart from the images
        assert [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")] == [1, 2]


def test_scenes_at_the_seed_size_stream_into_resunet_train(run_recipe):
    """recipes/resunet_stream.py: 1.2 million generated scenes (nothing on disk or on the driver); --quick
    trains torch:none on the first 40."""
    recipe = load_recipe("resunet_stream")
    code, summary, client = run_recipe(recipe, "--quick", "--trials", "torch:none")
    assert code == 0, summary
    run = client.get_run(summary["trials"][0]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["data"] == "scenes" and run.data.params["train_samples"] == "40"
    assert run.data.metrics["val_mask_iou"] >= 0 and run.data.metrics["input_wait_s"] >= 0
