"""Fashion-MNIST MLP: Flatten, Dense(128, relu), Dropout(0.2), Dense(10); 101,770 parameters.

Adam lr 5e-4 (epsilon 1e-7 on both sides), batch 32 per replica, 10 epochs, accuracy on the
10,000 test images. Initialisers are set explicitly (Glorot-uniform kernels, zero biases)
so TensorFlow and PyTorch start from the same distribution.

    python recipes/fashion.py                                   # default trials, 1 and 2 workers
    python recipes/fashion.py --trials tf:mwms,torch:ddp --workers 2
    python recipes/fashion.py --quick                           # smoke run: data subset, 1 epoch
    ray job submit --working-dir . -- python recipes/fashion.py --tracking-uri http://127.0.0.1:5000
"""

from raylab import Recipe, main
from raylab.data import fashion_mnist


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras (Keras 3 has no ParameterServerStrategy)
        import keras

    dense = dict(kernel_initializer="glorot_uniform", bias_initializer="zeros")
    return keras.Sequential([
        keras.Input((28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu", **dense),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(10, **dense),
    ])


def torch_model():
    from torch import nn

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):  # torch's default is Kaiming-uniform(a=sqrt(5))
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


RECIPE = Recipe(
    name="fashion",
    data=fashion_mnist,
    models={"tf": tf_model, "torch": torch_model},
    batch_per_replica=32,
    lr=5e-4,
    epochs=10,
    adam_epsilon=1e-7,
    default_trials=("tf:none", "tf:mirrored", "tf:mwms", "torch:none", "torch:ddp", "xla:single"),
    default_workers=(1, 2),
    target_accuracy=0.85,
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
