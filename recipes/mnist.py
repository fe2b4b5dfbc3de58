"""MNIST "normal vs distributed": the seed MLP with and without a distribution strategy on one machine.

The same model (raylab/models/mlp.py: Flatten, Dense 128 relu, Dropout 0.2, Dense 10), batch 25
per replica, 10 epochs, Adam lr 1e-3 (Keras' default, as in the seed), run plainly (tf:none,
torch:none) and under a strategy (tf:mirrored, torch:ddp) with one replica: the difference is what
the strategy itself costs. MNIST digits are read from the original IDX files on the data path
(`mnist/` under $RAYLAB_DATA_DIR, ~/.keras/datasets or /usr/share/datasets); where they are not
installed the recipe runs on Fashion-MNIST and records that (param `data`, tag `data_note`).

    python recipes/mnist.py                                    # 4 trials x 1 worker, 10 epochs
    python recipes/mnist.py --repeats 3 --epochs 1             # is the strategy's cost significant?
    python recipes/mnist.py --quick
"""

from raylab import Recipe, Scale, main, optimizer
from raylab.data import mnist
from raylab.models.mlp import jax_model, tf_model, torch_model

RECIPE = Recipe(
    name="mnist",
    data=mnist,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    batch_per_replica=25,
    epochs=10,
    loss="sparse_categorical_crossentropy",  # from logits
    optimizer=optimizer("adam", 1e-3, epsilon=1e-7),  # Keras' epsilon, in every framework
    metrics=("accuracy",),
    preprocess=Scale(1 / 255),  # uint8 pixels to [0, 1]
    default_trials=("tf:none", "tf:mirrored", "torch:none", "torch:ddp"),
    default_workers=(1,),
    target_accuracy={"mnist": 0.97, "fashion-mnist": 0.85},
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
