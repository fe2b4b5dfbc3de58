"""Procedural scenes for segmentation + depth: seeded, vectorised numpy, no download.

Each image is a dark, textured, noisy background (a far plane, gently tilted) with 2 to 4 large,
bright shapes (discs, rotated rectangles, triangles), each at its own depth; nearer shapes occlude
farther ones and are drawn brighter, so depth can be read from appearance as well as from occlusion.

    x      (N, 96, 96, 3) float32 in [0, 1]
    mask   (N, 96, 96, 1) float32 in {0, 1}: 1 where any shape is visible
    depth  (N, 96, 96, 1) float32: a shape's own depth in [NEAR, MID] on it, the background plane
           in [FAR - TILT, FAR] elsewhere (so depth on a shape is always less than on the background)
"""

from __future__ import annotations

import numpy as np

__all__ = ["SEED_SCENES", "SIZE", "scene_items", "scene_stream", "scenes", "train_test"]  # docs/api.md

SIZE = 96
MAX_SHAPES = 4
NEAR, MID = 0.2, 0.7  # shape depths
R_MIN, R_MAX = 0.13, 0.22  # shape sizes, as fractions of the image side
NOISE = 0.03  # pixel noise (standard deviation)
FAR, TILT = 1.0, 0.15  # background plane: FAR at the top, down to FAR - tilt (tilt <= TILT) at the bottom
CHUNK = 256  # images generated at once (bounds the temporaries: CHUNK x MAX_SHAPES x SIZE x SIZE)


def scenes(n: int, seed: int, size: int = SIZE) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """n scenes, the same for the same (n, seed): (x, {"mask": ..., "depth": ...})."""
    rng = np.random.default_rng(seed)
    x = np.empty((n, size, size, 3), np.float32)
    mask = np.empty((n, size, size, 1), np.float32)
    depth = np.empty((n, size, size, 1), np.float32)
    for i in range(0, n, CHUNK):
        m = min(CHUNK, n - i)
        x[i : i + m], mask[i : i + m, ..., 0], depth[i : i + m, ..., 0] = _chunk(rng, m, size)
    return x, {"mask": mask, "depth": depth}


def train_test(n_train: int, n_test: int, seed: int = 0):
    """(x_train, y_train, x_test, y_test): train and test drawn from different seeds."""
    x_train, y_train = scenes(n_train, seed)
    x_test, y_test = scenes(n_test, seed + 1_000_003)
    return x_train, y_train, x_test, y_test


def _chunk(rng, n: int, size: int):
    k = MAX_SHAPES
    c = (np.arange(size, dtype=np.float32) + 0.5) / size
    gy, gx = c[:, None], c[None, :]  # (H, 1), (1, W): coordinates in (0, 1)

    def param(lo, hi, shape=(n * k,)):  # one value per shape slot, (n * k, 1, 1) against the grid
        return rng.uniform(lo, hi, shape).astype(np.float32)[:, None, None]

    kind = rng.integers(0, 3, n * k)  # 0 disc, 1 rectangle, 2 triangle
    present = (np.arange(k)[None, :] < rng.integers(2, k + 1, (n, 1))).reshape(-1)
    cx, cy, r, theta, aspect, d = (
        param(*a) for a in ((0.2, 0.8), (0.2, 0.8), (R_MIN, R_MAX), (0, np.pi), (0.55, 1.0), (NEAR, MID))
    )
    cover = np.zeros((n * k, size, size), bool)
    for j, inside in enumerate((_disc, _rectangle, _triangle)):
        s = np.flatnonzero((kind == j) & present)
        cover[s] = inside(gx - cx[s], gy - cy[s], r[s], theta[s], aspect[s])

    # The visible shape at each pixel is the nearest one covering it (painter's algorithm, far to near).
    ranked = np.where(cover, d, np.float32(np.inf)).reshape(n, k, size, size)
    front = ranked.argmin(axis=1)  # (n, H, W): the slot in front
    dmap = ranked.min(axis=1)
    fg = np.isfinite(dmap)
    tilt = rng.uniform(0, TILT, (n, 1, 1)).astype(np.float32)
    depth = np.where(fg, dmap, FAR - tilt * gy).astype(np.float32)

    # Bright shapes, shaded by depth (nearer = brighter: 1.0 at NEAR, 0.7 at MID), on a dark texture.
    shade = 1.0 - 0.6 * (d.reshape(n, k) - NEAR)
    colours = rng.uniform(0.55, 1.0, (n, k, 3)).astype(np.float32) * shade[..., None]  # (n, k, 3)
    shape_rgb = colours[np.arange(n)[:, None, None], front]  # (n, H, W, 3)
    phi, freq, phase = (
        rng.uniform(lo, hi, (n, 1, 1)).astype(np.float32) for lo, hi in ((0, np.pi), (8, 30), (0, 2 * np.pi))
    )
    stripes = np.sin(freq * (gx * np.cos(phi) + gy * np.sin(phi)) + phase)  # (n, H, W)
    ground = rng.uniform(0.05, 0.2, (n, 1, 1, 3)).astype(np.float32) + 0.05 * stripes[..., None]
    image = np.where(fg[..., None], shape_rgb, ground)
    image += np.float32(NOISE) * rng.standard_normal(image.shape, dtype=np.float32)
    return np.clip(image, 0.0, 1.0), fg.astype(np.float32), depth


def _disc(dx, dy, r, theta, aspect):
    return dx * dx + dy * dy < r * r


def _rectangle(dx, dy, r, theta, aspect):
    cos, sin = np.cos(theta), np.sin(theta)
    return (np.abs(dx * cos + dy * sin) < 0.9 * r) & (np.abs(dy * cos - dx * sin) < 0.9 * r * aspect)


def _triangle(dx, dy, r, theta, aspect):
    """Equilateral, circumradius 1.2 r: inside = left of every edge of the counter-clockwise corners."""
    corners = [
        (1.2 * r * np.cos(theta + j * 2 * np.pi / 3), 1.2 * r * np.sin(theta + j * 2 * np.pi / 3)) for j in range(3)
    ]
    inside = np.ones(np.broadcast_shapes(dx.shape, dy.shape), bool)
    for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1]):
        inside &= (bx - ax) * (dy - ay) - (by - ay) * (dx - ax) > 0
    return inside


SEED_SCENES = 1_200_000  # the seed notebook's training set: 1.2 million 96x96x3 images


def scene_items(ids, split: str, seed: int = 0) -> dict:
    """Scenes for item ids (consecutive, as Ray Data's range hands them out), made where they are needed:
    {"x", "mask", "depth"}. The same ids of the same split and seed give the same scenes; train and test
    are drawn from different streams."""
    ids = np.asarray(ids)
    first = int(ids[0]) if len(ids) else 0
    x, targets = scenes(len(ids), (seed, 0 if split == "train" else 1, first))
    return {"x": x, **targets}


def scene_stream(train_items: int = SEED_SCENES, test_items: int = 144, seed: int = 0):
    """The scenes as a raylab.data.stream generator source: any number of items, generated on the Ray Data side
    (nothing on disk or on the driver), 256 at a time."""
    import functools

    from raylab.data.stream import generator

    return generator(
        functools.partial(scene_items, seed=seed),
        train_items,
        test_items,
        inputs="x",
        targets=("mask", "depth"),
        name="scenes",
        batch=CHUNK,
        source=f"procedural scenes generated on the fly ({train_items:,} train / {test_items:,} test)",
    )
