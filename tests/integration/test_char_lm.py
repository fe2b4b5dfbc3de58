"""recipes/char_lm.py, the transformer, trained --quick in torch, TF and JAX through its real command line on the
shared local cluster: parity fair, token ids integer end to end (uint8 arrays through Ray's object store, int32 in
each model: the built report reads what the model was fed), its activations and its work per sample read alike;
and token ids streamed from `.npy` and Parquet files stay uint8 until the worker casts them (Ray Data on the shared
cluster, no Ray Train start-up)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 3  # tf:none, torch:none, jax:none
SECONDS = 150

# recipes/char_lm.py's step a sequence: forward, weight and input gradients of its dense layers and attention
# products (tests/unit/test_flops.py holds the arithmetic)
FLOPS = 50_331_648


def test_the_transformer_trains_alike_in_three_frameworks_on_integer_token_ids(run_recipe, capsys):
    recipe = load_recipe("char_lm")
    code, summary, client = run_recipe(recipe, "--quick", "--compile", "best")  # the default command: each one's best
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "parity: fair" in out, out[-3000:]
    assert len(summary["trials"]) == 3
    for trial in summary["trials"]:
        run = client.get_run(trial["run_id"])
        tags, metrics = run.data.tags, run.data.metrics
        assert run.info.status == "FINISHED", trial
        # uint8 ids in [9, 126] (tabs, newlines and printable text) fed to the model as int32
        assert tags["built_preprocess"].startswith("cast to int32; test inputs int32 in ["), tags["built_preprocess"]
        assert json.loads(tags["activations"]) == {"gelu (exact)": 2}, tags["activations"]
        assert tags["parameters"] == "137216" and run.data.params["data"] == "python-stdlib-bytes"
        assert metrics["flops_per_sample"] == FLOPS, metrics
        assert metrics["val_accuracy"] > 0.1, metrics  # next byte; the commonest byte (a space) is under 0.1


@pytest.mark.parametrize("form", ["npy", "parquet"])
def test_token_ids_stream_from_files_as_uint8_and_reach_the_model_as_declared(ray_cluster, tmp_path, form):
    """uint8 token ids in `.npy` shards or a Parquet list column, read by Ray Data and cut into batches by the
    worker's Reader and Delivery (as a streamed trial reads them): uint8 in every batch, then Cast("int32")'s int32
    from the worker's preparation, the values kept; the test split's range names the dtype prepared."""
    import pandas as pd

    from raylab.data.chunks import chunk_rows
    from raylab.data.deliver import Delivery, Reader
    from raylab.data.held_out import TestPass
    from raylab.data.opened import open_stream
    from raylab.data.stream import npy, parquet
    from raylab.task import Cast
    from raylab.task.common import prepare_inputs

    ds = load_recipe("char_lm").data(n_train=512, n_test=128)
    splits = {"train": (ds.x_train, ds.y_train), "test": (ds.x_test, ds.y_test)}
    for split, (x, y) in splits.items():
        (tmp_path / split).mkdir()
        if form == "parquet":  # a list<uint8> column a sequence
            pd.DataFrame({"x": list(x), "y": list(y)}).to_parquet(tmp_path / split / "part-0.parquet")
            continue
        for column, a in (("x", x), ("y", y)):
            (tmp_path / split / column).mkdir()
            for i, part in enumerate(np.array_split(a, 2)):
                np.save(tmp_path / split / column / f"part-{i}.npy", part)
    if form == "npy":
        source = npy(
            train={c: str(tmp_path / "train" / c) for c in "xy"},
            test={c: str(tmp_path / "test" / c) for c in "xy"},
            inputs="x",
            targets="y",
        )
    else:
        source = parquet(train=str(tmp_path / "train"), test=str(tmp_path / "test"), inputs="x", targets="y")
    opened = open_stream(source)
    train = opened.datasets["train"]
    reader = Reader(lambda: train.iter_batches(batch_size=chunk_rows(64), batch_format="pyarrow"), opened.info.names())
    delivery = Delivery(
        reader, 64, 0, lambda c: opened.info.split(c), lambda xy, lo, hi: (xy[0][lo:hi], xy[1][lo:hi]), total=8
    )
    batches = [delivery.next() for _ in range(8)]
    assert all(x.dtype == np.uint8 and x.shape == (64, 64) for x, _ in batches), {x.dtype for x, _ in batches}
    seen = np.concatenate([x for x, _ in batches])
    assert sorted(map(bytes, seen)) == sorted(map(bytes, ds.x_train)), "every training sequence once, unchanged"
    prepared = prepare_inputs(Cast("int32"), batches[0][0], "torch")
    assert prepared.dtype == np.int32 and (prepared == batches[0][0]).all()
    evaluations = TestPass(opened.datasets["test"], opened.info, lambda x, y: (Cast("int32")(x), y), 64)
    assert sum(len(y) for _, y in evaluations) == 128
    assert evaluations.range == (float(ds.x_test.min()), float(ds.x_test.max()), "int32")
