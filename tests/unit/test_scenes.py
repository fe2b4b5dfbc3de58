"""The procedural scenes of recipes/resunet_train.py: seeded, well-formed, and learnable by construction."""

from __future__ import annotations

import numpy as np
import pytest

from raylab.data import as_dataset
from raylab.data.scenes import FAR, MID, NEAR, TILT, scenes, train_test


@pytest.fixture(scope="module")
def batch():
    return scenes(300, seed=7)  # more than one generation chunk


def test_same_seed_same_scenes_other_seed_other_scenes(batch):
    x, y = batch
    x2, y2 = scenes(300, seed=7)
    assert np.array_equal(x, x2) and all(np.array_equal(y[k], y2[k]) for k in y)
    x3, _ = scenes(300, seed=8)
    assert not np.array_equal(x, x3)


def test_shapes_dtypes_and_ranges(batch):
    x, y = batch
    assert list(y) == ["mask", "depth"]  # the model's output order
    assert x.shape == (300, 96, 96, 3) and y["mask"].shape == y["depth"].shape == (300, 96, 96, 1)
    assert x.dtype == y["mask"].dtype == y["depth"].dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert set(np.unique(y["mask"])) == {0.0, 1.0}
    assert NEAR <= y["depth"].min() and y["depth"].max() <= FAR
    assert np.isfinite(y["depth"]).all()


def test_every_scene_has_foreground_and_background(batch):
    fraction = batch[1]["mask"].reshape(300, -1).mean(1)
    assert 0.03 < fraction.min() and fraction.max() < 0.6
    assert 0.12 < fraction.mean() < 0.35  # all-foreground would score IoU = this; all-background 0


def test_shapes_are_nearer_than_the_background(batch):
    _, y = batch
    on = y["mask"] > 0.5
    shape_depth, ground_depth = y["depth"][on], y["depth"][~on]
    assert shape_depth.max() <= MID < FAR - TILT <= ground_depth.min()
    assert len(np.unique(shape_depth)) > 300  # each shape at its own depth
    # The background is a plane tilting gently towards the viewer from top to bottom.
    d, ground = y["depth"][..., 0], ~on[..., 0]
    below = ground[:, 1:] & ground[:, :-1]  # background pixels whose upper neighbour is background too
    step = d[:, 1:][below] - d[:, :-1][below]
    assert (step <= 1e-6).all() and (step >= -TILT / 90).all() and step.min() < 0


def test_shapes_stand_out_and_nearer_is_brighter(batch):
    x, y = batch
    on = y["mask"][..., 0] > 0.5
    brightness = x.sum(-1)
    assert brightness[on].mean() > brightness[~on].mean() + 1.0
    near, far = on & (y["depth"][..., 0] < 0.35), on & (y["depth"][..., 0] > 0.55)
    assert brightness[near].mean() > brightness[far].mean()


def test_train_and_test_differ_and_make_a_dataset():
    x_train, y_train, x_test, y_test = train_test(8, 4, seed=0)
    assert len(x_train) == 8 and len(x_test) == 4
    assert not any(np.array_equal(a, b) for a in x_test for b in x_train)
    ds = as_dataset((x_train, y_train, x_test, y_test), "resunet_train")
    assert ds.target_names == ("mask", "depth")
