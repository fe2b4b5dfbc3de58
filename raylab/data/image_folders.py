"""An image folder per split read for `raylab.data.stream.images`: its class folders and files listed on the driver
(names only), then decoded by Ray Data's tasks, IMAGES_PER_TASK files at a time, with PIL."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from raylab.errors import UserError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
IMAGES_PER_TASK = (
    1024  # files one Ray Data task decodes (bench/studies/delivery.py: 256 per task decoded 7k images/s, 1024 9k)
)


def listing(folder: str, classes: list[str]) -> tuple[list[str], np.ndarray]:
    """Every image file under folder/CLASS/ (sorted), and its class's index."""
    import os

    if not Path(folder).is_dir():
        raise UserError(f"images(): {folder} is not a directory; give a folder holding one sub-folder per class.")
    paths, labels = [], []
    for i, c in enumerate(classes):
        if not (Path(folder) / c).is_dir():
            continue  # a class with no images in this split
        files = sorted(e.path for e in os.scandir(Path(folder) / c) if e.name.lower().endswith(IMAGE_SUFFIXES))
        paths += files
        labels += [i] * len(files)
    if not paths:
        raise UserError(f"images(): {folder} holds no image files ({', '.join(IMAGE_SUFFIXES)}) in its class folders.")
    return paths, np.array(labels, np.int64)


def decoder(size: tuple[int, int], mode: str):
    h, w = size

    def decode(batch: dict) -> dict:
        from PIL import Image

        paths = batch["path"]
        out = None
        for i, path in enumerate(paths):
            with Image.open(path) as im:
                im = im if im.mode == mode else im.convert(mode)
                if im.size != (w, h):
                    im = im.resize((w, h))
                a = np.asarray(im)
            if out is None:
                out = np.empty((len(paths), *a.shape), np.uint8)
            out[i] = a
        return {"x": out, "y": batch["y"]}

    return decode


def classes(folder: str) -> list[str]:
    if "://" in folder:
        raise UserError(
            f"images(): {folder}: class folders are listed locally; copy the images to a local or "
            "mounted path, or build a ray_dataset() with your own labels."
        )
    if not Path(folder).is_dir():
        raise UserError(f"images(): {folder} is not a directory; give a folder holding one sub-folder per class.")
    classes = sorted(d.name for d in Path(folder).iterdir() if d.is_dir())
    if not classes:
        raise UserError(f"images(): {folder} has no sub-folders; put each class's images in a sub-folder of its own.")
    return classes
