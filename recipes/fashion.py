"""Fashion-MNIST MLP (raylab/models/mlp.py): Flatten, Dense(128, relu), Dropout(0.2), Dense(10); 101,770 parameters.

Adam lr 5e-4 (epsilon 1e-7 in every framework), batch 32 per replica, 10 epochs, accuracy on the
10,000 test images; the time to 0.85 test accuracy is recorded beside the throughput.

    python recipes/fashion.py                                   # default trials, 1 and 2 workers
    python recipes/fashion.py --trials tf:mwms,torch:ddp --workers 2
    python recipes/fashion.py --quick                           # smoke run: data subset, 1 epoch
    # a job on a Ray head, to an MLflow server on port 5001 (5000 is the MLflow UI's): docs/clusters.md
    ray job submit --working-dir . -- python recipes/fashion.py --tracking-uri http://127.0.0.1:5001
"""

from raylab import Recipe, Scale, main, optimizer
from raylab.data import fashion_mnist
from raylab.models.mlp import jax_model, tf_model, torch_model

RECIPE = Recipe(
    name="fashion",
    data=fashion_mnist,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    batch_per_replica=32,
    epochs=10,
    loss="sparse_categorical_crossentropy",  # from logits
    optimizer=optimizer("adam", 5e-4, epsilon=1e-7),  # Keras' epsilon, in every framework
    metrics=("accuracy",),
    preprocess=Scale(1 / 255),  # uint8 pixels to [0, 1]
    default_trials=("tf:none", "tf:mirrored", "tf:mwms", "torch:none", "torch:ddp", "xla:single", "jax:none", "jax:dp"),
    default_workers=(1, 2),
    target_accuracy=0.85,
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
