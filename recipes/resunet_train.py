"""ResNet-UNet training: a mask head and a depth head learned on procedural scenes, in TF, torch, XLA and JAX.

The model (raylab/models/resunet.py, 29,539,970 parameters in every framework) takes 96x96x3 images
and returns a mask (logits; binary cross-entropy) and a depth map (L1). The data needs no download:
raylab/data/scenes.py draws bright discs, rectangles and triangles, each at its own depth and shaded by it,
on a dark textured background plane (train and test from different seeds). The test split is scored
with the mask's foreground IoU and Dice (logits > 0 against the true mask) and the depth's MAE.

A training step costs about 1 s per image on one CPU thread: batch 2, 3 epochs of 100 steps. The
BatchNorm moving statistics (momentum 0.9) need ~20 steps before evaluation-mode outputs follow what
training learnt, so --quick runs 20 steps (40 images) and scores 32 test images; xla:single compiles
during its first two steps (~45 s on CPU) and its evaluation once.

    python recipes/resunet_train.py                              # tf:none, torch:none, xla:single
    python recipes/resunet_train.py --quick                      # 20 steps of 2, 32 test images
    python recipes/resunet_train.py --quick --trials torch:none --tracking-uri sqlite:////tmp/mlflow.db
    python recipes/resunet_train.py --trials torch:none --epochs 6 --threads 2
"""

from raylab import Recipe, main, optimizer
from raylab.models.resunet import jax_model, tf_model, torch_model
from raylab.data.scenes import train_test

TRAIN_SCENES, TEST_SCENES = 1024, 144  # 144 = two evaluation batches of 72 96x96x3 images


def scenes():
    """(x_train, {"mask", "depth"}, x_test, {"mask", "depth"}): float32 images in [0, 1]."""
    return train_test(TRAIN_SCENES, TEST_SCENES, seed=0)


RECIPE = Recipe(
    name="resunet_train",
    data=scenes,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    loss={"mask": "binary_crossentropy", "depth": "mean_absolute_error"},  # mask from logits
    optimizer=optimizer("adam", 1e-3, epsilon=1e-7),  # Keras' epsilon, in every framework
    metrics={"mask": ["iou", "dice"], "depth": ["mae"]},
    preprocess=None,  # the scenes are float32 in [0, 1] already
    batch_per_replica=2,
    epochs=3,
    steps_per_epoch=100,
    default_trials=("tf:none", "torch:none", "xla:single"),
    default_workers=(1,),
    quick_train=40,  # 20 steps of 2
    quick_test=32,  # one evaluation batch
    warmup_steps=2,  # XLA compiles the first two steps
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
