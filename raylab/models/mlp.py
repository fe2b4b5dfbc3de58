"""The seed MLP: Flatten, Dense(128, relu), Dropout(0.2), Dense(10) on 28x28 images; 101,770 parameters.

Shared by the fashion and mnist recipes. Initialisers are set explicitly (Glorot-uniform kernels,
zero biases) so TensorFlow, PyTorch and JAX start from the same distribution. A package module rather
than a recipe file, so Ray workers import it by name wherever the recipe runs.
"""

__all__ = ["jax_model", "tf_model", "torch_model"]  # docs/api.md


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras (Keras 3 has no ParameterServerStrategy)
        import keras

    dense = dict(kernel_initializer="glorot_uniform", bias_initializer="zeros")
    return keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu", **dense),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10, **dense),
        ]
    )


def torch_model():
    from torch import nn

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):  # torch's default is Kaiming-uniform(a=sqrt(5))
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


def jax_model(rngs):
    """A Flax NNX module; `rngs` (an nnx.Rngs) draws its parameters and its dropout masks."""
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            dense = dict(
                kernel_init=nnx.initializers.glorot_uniform(), bias_init=nnx.initializers.zeros_init(), rngs=rngs
            )
            self.hidden, self.out = nnx.Linear(784, 128, **dense), nnx.Linear(128, 10, **dense)
            self.dropout = nnx.Dropout(0.2, rngs=rngs)

        def __call__(self, x):
            x = x.reshape(x.shape[0], -1)
            return self.out(self.dropout(nnx.relu(self.hidden(x))))

    return MLP(rngs)
