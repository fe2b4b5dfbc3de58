"""A TF trial's state as its worker keeps it: checkpointed in TF's own format (`tf_saver`), its weights summed per
in-process replica to compare replicas (`replica_checksums`). The parameter-server loop shares both."""

from __future__ import annotations

import os
import tempfile

import numpy as np


def tf_saver(tf, dist, model, optimizer):
    """Checkpoints in TF's own format (tf.train.Checkpoint: model and optimizer variables, the step counter
    the learning-rate schedule reads); every rank writes (rank 0 into the checkpoint, the others into a
    scratch directory, as multi-worker TF expects), every rank reads."""
    import shutil

    from raylab.loop.checkpoint import Saver

    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)

    def save(directory: str, rank: int) -> None:
        where = directory if rank == 0 else tempfile.mkdtemp(prefix="raylab-tf-scratch-")
        ckpt.write(os.path.join(where, "tf"))
        if rank != 0:
            shutil.rmtree(where, ignore_errors=True)

    def load(directory: str) -> None:
        with dist.scope():
            ckpt.read(os.path.join(directory, "tf")).assert_existing_objects_matched()

    return Saver(save, load)


def replica_checksums(dist, model) -> list[float]:
    """Sum of |weights| per in-process replica (MirroredStrategy keeps one copy per device)."""
    per: list[float] = []
    for v in model.weights:  # a Keras 3 variable's .value is the tf variable (a MirroredVariable in scope)
        for i, part in enumerate(dist.experimental_local_results(getattr(v, "value", v))):
            total = float(np.abs(np.asarray(part, dtype="float64")).sum())
            per[i : i + 1] = [per[i] + total] if i < len(per) else [total]
    return per
