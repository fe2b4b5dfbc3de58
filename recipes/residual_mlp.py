"""A user's own model in three frameworks: a pre-norm residual MLP on 16 features, 4 classes; 69,508 parameters.

Stem Linear(16, 128); two blocks of x + Linear(Dropout(ReLU(Linear(LayerNorm(x))))), 128 wide, dropout 0.1; a final
LayerNorm and Linear(128, 4). AdamW 2e-3 (weight decay 1e-4), cosine schedule after 100 warm-up steps, batch 64.
LayerNorm's epsilon (Keras 1e-3, torch 1e-5, Flax 1e-6 by default) and every initializer are set explicitly, so the
three models are one model. The data is the recipe's own: a fixed random teacher network labels Gaussian features.

    python recipes/residual_mlp.py --quick                               # tf:none, torch:none, jax:none
    python recipes/residual_mlp.py --trials torch:none --threads 1       # one framework
"""

import numpy as np

from raylab import Recipe, Schedule, main, optimizer

EPS, WIDTH, DROPOUT = 1e-5, 128, 0.1


def teacher_data(n_train: int = 32768, n_test: int = 4096, seed: int = 0):
    """(x_train, y_train, x_test, y_test): Gaussian features labelled by a fixed random two-layer teacher."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_train + n_test, 16)).astype(np.float32)
    w1, w2 = rng.normal(size=(16, 64)), rng.normal(size=(64, 4))
    y = (np.tanh(x @ w1) @ w2).argmax(1).astype(np.int64)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras
        import keras

    dense = dict(kernel_initializer="glorot_uniform", bias_initializer="zeros")
    x = inputs = keras.Input((16,))
    x = keras.layers.Dense(WIDTH, **dense)(x)
    for _ in range(2):
        h = keras.layers.LayerNormalization(epsilon=EPS)(x)
        h = keras.layers.Dense(WIDTH, activation="relu", **dense)(h)
        h = keras.layers.Dropout(DROPOUT)(h)
        x = x + keras.layers.Dense(WIDTH, **dense)(h)
    x = keras.layers.LayerNormalization(epsilon=EPS)(x)
    return keras.Model(inputs, keras.layers.Dense(4, **dense)(x))


def torch_model():
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.up, self.down = (
                nn.LayerNorm(WIDTH, eps=EPS),
                nn.Linear(WIDTH, WIDTH),
                nn.Linear(WIDTH, WIDTH),
            )
            self.drop = nn.Dropout(DROPOUT)

        def forward(self, x):
            return x + self.down(self.drop(self.up(self.norm(x)).relu()))

    model = nn.Sequential(nn.Linear(16, WIDTH), Block(), Block(), nn.LayerNorm(WIDTH, eps=EPS), nn.Linear(WIDTH, 4))
    for layer in model.modules():
        if isinstance(layer, nn.Linear):  # torch's default is Kaiming-uniform(a=sqrt(5))
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


def jax_model(rngs):
    """A Flax NNX module; `rngs` (an nnx.Rngs) draws its parameters and its dropout masks."""
    from flax import nnx

    dense = dict(kernel_init=nnx.initializers.glorot_uniform(), bias_init=nnx.initializers.zeros_init(), rngs=rngs)

    class Block(nnx.Module):
        def __init__(self):
            self.norm = nnx.LayerNorm(WIDTH, epsilon=EPS, rngs=rngs)
            self.up, self.down = nnx.Linear(WIDTH, WIDTH, **dense), nnx.Linear(WIDTH, WIDTH, **dense)
            self.drop = nnx.Dropout(DROPOUT, rngs=rngs)

        def __call__(self, x):
            return x + self.down(self.drop(nnx.relu(self.up(self.norm(x)))))

    class ResidualMLP(nnx.Module):
        def __init__(self):  # blocks as named attributes (Flax 0.12 rejects a plain list of modules)
            self.stem, self.block1, self.block2 = nnx.Linear(16, WIDTH, **dense), Block(), Block()
            self.norm, self.head = nnx.LayerNorm(WIDTH, epsilon=EPS, rngs=rngs), nnx.Linear(WIDTH, 4, **dense)

        def __call__(self, x):
            return self.head(self.norm(self.block2(self.block1(self.stem(x)))))

    return ResidualMLP()


RECIPE = Recipe(
    name="residual_mlp",
    data=teacher_data,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    loss="sparse_categorical_crossentropy",  # from logits
    metrics=("accuracy",),
    optimizer=optimizer("adamw", 2e-3, weight_decay=1e-4),
    schedule=Schedule("cosine", warmup=100),
    batch_per_replica=64,
    epochs=3,
    default_trials=("tf:none", "torch:none", "jax:none"),
    default_workers=(1,),
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
