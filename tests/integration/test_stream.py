"""Streamed data on the shared local cluster: Fashion-MNIST exported to Parquet by `raylab data export`, its
--quick rows sorted by label into one file (as a database export or a file written class by class is), and trained
from that file in every framework (one of them losing a worker), held to the same rows in memory (conftest.py's
`lost_workers`: this file is in that run's slice). (The scenes generator and Ray Data's delivery:
test_stream_reading.py; an exported Parquet and .npy shards trained, the export's refusal: test_streamed_files.py;
an image folder: test_image_folder.py, default tier; the batch sweep: test_image_folder_sweep.py, full tier.)
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.integration.conftest import LOST_STEPS, LOST_STEPS_N, ROOT, held, shared_run
from tests.integration.killing import children, no_train_workers_left
from tests.integration.test_fault_tolerance import runs_by_trial

pytestmark = pytest.mark.integration
TIER = "full"
RAY_TRAIN_STARTS = 0  # the trials are the shared runs'
SECONDS = 430  # the streamed run (380) and the export
STEPS = LOST_STEPS_N  # per epoch, as LOST_STEPS


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Fashion-MNIST as Parquet, written by the real command a user runs."""
    out = tmp_path_factory.mktemp("stream") / "fashion-parquet"
    done = subprocess.run(
        [sys.executable, "-m", "raylab", "data", "export", str(ROOT / "recipes" / "fashion.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"--data {out}" in done.stdout
    return out


@pytest.fixture(scope="module")
def sorted_by_label(exported, tmp_path_factory):
    """The export with its train split replaced by one file of the rows --quick trains on in memory (the first
    8,192, the export's first file), sorted by label: ten runs of one class each (issue 49: a stream shuffled only
    within chunks of 2,048 rows trained a label-sorted table to 0.71-0.74 where shuffled rows reached 0.94)."""
    import json
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import ray.data  # noqa: F401 - registers Ray Data's tensor columns: read and written back as the export wrote them

    out = tmp_path_factory.mktemp("sorted") / "fashion-sorted"
    shutil.copytree(exported, out)
    first = out / "train" / "part-00000.parquet"
    table = pq.read_table(first)
    for f in (out / "train").glob("*.parquet"):
        f.unlink()
    pq.write_table(table.take(pc.sort_indices(table, [("y", "ascending")])), out / "train" / "sorted.parquet")
    manifest = json.loads((out / "raylab-data.json").read_text())
    (out / "raylab-data.json").write_text(json.dumps({**manifest, "train_items": table.num_rows}))
    y = pq.read_table(out / "train" / "sorted.parquet", columns=["y"]).column("y").to_numpy()
    assert table.num_rows == 8192 and (np.diff(y) >= 0).all() and len(np.unique(y)) == 10
    return out


@pytest.fixture(scope="module")
def streamed(ray_cluster, tmp_path_factory, template_db, sorted_by_label):
    """tf:none, tf:mwms x2, torch:ddp x2, xla:single, jax:none and jax:dp x2 from the label-sorted Parquet file, with
    the in-memory run's recipe (the held one), seed, data (--quick's first 8,192 items, the same rows), steps and
    batch (conftest.py `lost_workers`); torch:ddp x2 loses a worker while it holds mid-epoch 2. Each trial
    checkpoints at epoch ends and inside epochs as often as checkpoints go (--checkpoint-every 0.0001 minutes: the
    interval, calibrated in steps, comes out below one window, so it is a window on a machine of any speed): the
    lost worker's trial resumes from a window end of epoch 2, past batches it then skips over."""
    where = tmp_path_factory.mktemp("streamed")
    return shared_run(
        where,
        template_db,
        "streamed",
        6,
        held(where / "gate", LOST_STEPS_N),
        "--trials",
        "tf:none,tf:mwms x2,torch:ddp x2,xla:single,jax:none,jax:dp x2",
        *LOST_STEPS,
        "--checkpoint-every",
        "0.0001",
        "--data",
        str(sorted_by_label),
        kill={"torch:ddp x2": ["worker"]},
        seconds=380,
    )


def test_a_label_sorted_file_trains_in_every_framework_like_in_memory(streamed, lost_workers):
    """Every trial FINISHED, input_wait_s and Ray Data's statistics recorded for the streamed ones, test accuracy close
    to the same trial on the same rows in memory (the uninterrupted twins of `lost_workers`: tf, torch and jax; the 0.01
    comparison of every trial on whole epochs is bench/studies/stream.py parity's; here 600 steps of batch 32) though
    the file is sorted by label: each worker's split was shuffled whole every pass, and says so."""
    assert streamed.code == 0, streamed.tail()
    memory = {
        name: run
        for name, runs in runs_by_trial(lost_workers).items()
        for restarted, run in runs
        if not restarted and name in ("tf:mwms x2", "torch:ddp x2", "jax:dp x2")
    }
    accs = {}
    for trial in streamed.summary["trials"]:
        run = streamed.client.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", trial
        assert run.data.params["data_streamed"] == "True"
        # --quick takes the first 8,192 rows of the Parquet files, as it takes the first items in memory
        assert run.data.params["train_samples"] == "8192" and run.data.params["data"] == "fashion-mnist"
        assert run.data.metrics["input_wait_s"] >= 0 and 0 <= run.data.metrics["input_wait_share"] < 1
        assert run.data.tags["input"].startswith("streamed")
        assert run.data.params["shuffle"] == "global", trial  # the window held the worker's whole split
        artifacts = [a.path for a in streamed.client.list_artifacts(trial["run_id"])]
        assert "ray_data_stats.txt" in artifacts, artifacts
        accs[trial["trial"]] = {"streamed": run.data.metrics["val_accuracy"]}
    for name, run in memory.items():
        assert run.data.params["data_streamed"] == "False" and run.data.params["shuffle"] == "global"
        accs[name]["memory"] = run.data.metrics["val_accuracy"]
    assert set(accs) == {"tf:none x1", "tf:mwms x2", "torch:ddp x2", "xla:single x1", "jax:none x1", "jax:dp x2"}, accs
    for trial, acc in accs.items():
        assert acc["streamed"] > 0.75, (trial, acc)
        assert "memory" not in acc or abs(acc["streamed"] - acc["memory"]) < 0.03, (trial, acc)
    two = streamed.run("tf:mwms x2")
    # 2 CPUs, 2 workers: each reserves half a CPU so Ray Data keeps one, and the trial says so.
    assert two.data.params["oversubscribed"] == "True" and two.data.params["data_cpus"] == "1.0"
    # a window that holds the split: no sorted-split warning; the parity report says the shuffle all shared
    assert "looks sorted" not in streamed.out + streamed.err and "    shuffle: global" in streamed.out


def test_streamed_trials_read_early_agree_on_what_was_built_and_print_no_ray_line(streamed):
    """Each trial's reader started with its training function, its first batch timed, the test split read before
    the train split's first pass and kept; every trial describes the
    same test inputs (the whole test split's range, not the first batch's); the raylet's worker-pool notice goes to
    driver.log, not the console."""
    built = set()
    for trial in streamed.summary["trials"]:
        run = streamed.client.get_run(trial["run_id"])
        m = run.data.metrics
        assert m["stream_read_early"] == 1 and m["stream_first_wait_s"] >= 0 and m["stream_first_chunk_s"] > 0, m
        assert m["stream_passes"] >= (1 if m.get("restarts") else 3), (
            trial["trial"],
            m,
        )  # 600 steps, 256 or 128 a pass
        # rank 0 read the test split before the train split's first pass, and evaluated from memory
        assert run.data.tags["test_input"].startswith("read once as the worker started"), run.data.tags
        built.add(run.data.tags["built_preprocess"])
    assert len(built) == 1 and "test inputs float32 in [0, 1]" in built.pop()
    # (this in-process harness also shows the workers' own lines and the raylet's note on the worker killed on
    # purpose; tests/e2e/test_console.py holds the terminal to raylab's lines)
    assert "worker processes have been started" not in streamed.out + streamed.err


def test_streamed_trial_survives_a_lost_worker(streamed):
    """torch:ddp x2 streaming from Parquet, a worker SIGKILLed in epoch 2 or 3 of 3: FINISHED after a restart,
    every epoch logged once, the batches it read past on resuming recorded."""
    assert [name for name, _, what in streamed.killer.killed if what] == ["torch:ddp x2"], streamed.killer.killed
    run = streamed.run("torch:ddp x2")
    assert run.info.status == "FINISHED"
    assert run.data.metrics["restarts"] == 1
    resumed = int(run.data.metrics["resumed_from_step"])
    assert STEPS < resumed < STEPS * 3 // 2, run.data.metrics  # a window end of epoch 2, before the hold
    skipped = run.data.metrics["stream_skipped_batches"]
    assert skipped == resumed % STEPS > 0, run.data.metrics  # the batches of epoch 2 it had trained, read past
    for key in ("val_accuracy", "epoch_time_s", "epoch_input_wait_s"):
        steps = [m.step for m in streamed.client.get_metric_history(run.info.run_id, key)]
        assert sorted(steps) == [1, 2, 3], (key, steps)
    assert children(streamed.client, streamed.summary["parent_run_id"])[0].info.status == "FINISHED"
    assert no_train_workers_left()
