"""CIFAR-10 with the Keras example CNN: two Conv-Conv-MaxPool-Dropout blocks (32, 64 filters), Dense 512, Dense 10.

Conv 3x3 relu (same, then valid padding) x2, MaxPool 2x2, Dropout 0.25, twice; Flatten, Dense 512
relu, Dropout 0.5, Dense 10: 1,250,858 parameters in TF, torch and JAX alike, Glorot-uniform kernels and
zero biases in each. Batch 128 per replica, Adam lr 1e-3 (raylab's trials train with Adam;
the Keras example used RMSprop 1e-4), 10 epochs. Reads CIFAR-10 (python or binary batches) from
the data path (`cifar-10/` under $RAYLAB_DATA_DIR, ~/.keras/datasets or /usr/share/datasets);
without them it runs on synthetic data of the same shape, recorded as data=cifar-10-synthetic,
and no accuracy is claimed.

    python recipes/cifar10.py --trials tf:mwms,torch:ddp --workers 2
    python recipes/cifar10.py --quick
"""

from raylab import Recipe, Scale, main, optimizer
from raylab.data import cifar10


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras
        import keras

    L = keras.layers
    init = dict(kernel_initializer="glorot_uniform", bias_initializer="zeros")

    def block(filters):
        return [
            L.Conv2D(filters, 3, padding="same", activation="relu", **init),
            L.Conv2D(filters, 3, activation="relu", **init),
            L.MaxPooling2D(2),
            L.Dropout(0.25),
        ]

    return keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            *block(32),
            *block(64),
            L.Flatten(),
            L.Dense(512, activation="relu", **init),
            L.Dropout(0.5),
            L.Dense(10, **init),
        ]
    )


def torch_model():
    import torch
    from torch import nn

    class ChannelsFirst(nn.Module):  # the data is NHWC in every framework; torch convolves NCHW
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.permute(0, 3, 1, 2)

    def block(cin, cout):
        return [
            nn.Conv2d(cin, cout, 3, padding="same"),
            nn.ReLU(),
            nn.Conv2d(cout, cout, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
        ]

    model = nn.Sequential(
        ChannelsFirst(),
        *block(3, 32),
        *block(32, 64),
        nn.Flatten(),
        nn.Linear(64 * 6 * 6, 512),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Linear(512, 10),
    )
    for layer in model:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


def jax_model(rngs):
    from flax import nnx

    init = dict(kernel_init=nnx.initializers.glorot_uniform(), bias_init=nnx.initializers.zeros_init(), rngs=rngs)

    class CNN(nnx.Module):
        def __init__(self):
            self.convs = nnx.List(
                [
                    nnx.Conv(3, 32, (3, 3), padding="SAME", **init),
                    nnx.Conv(32, 32, (3, 3), padding="VALID", **init),
                    nnx.Conv(32, 64, (3, 3), padding="SAME", **init),
                    nnx.Conv(64, 64, (3, 3), padding="VALID", **init),
                ]
            )
            self.dense, self.out = nnx.Linear(64 * 6 * 6, 512, **init), nnx.Linear(512, 10, **init)
            self.drop_block, self.drop_dense = nnx.Dropout(0.25, rngs=rngs), nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):  # NHWC, as the data
            for i in (0, 2):
                x = nnx.relu(self.convs[i + 1](nnx.relu(self.convs[i](x))))
                x = self.drop_block(nnx.max_pool(x, (2, 2), (2, 2)))
            return self.out(self.drop_dense(nnx.relu(self.dense(x.reshape(x.shape[0], -1)))))

    return CNN()


RECIPE = Recipe(
    name="cifar10",
    data=cifar10,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    batch_per_replica=128,
    epochs=10,
    loss="sparse_categorical_crossentropy",  # from logits
    optimizer=optimizer("adam", 1e-3, epsilon=1e-7),  # Keras' epsilon, in every framework
    metrics=("accuracy",),
    preprocess=Scale(1 / 255),  # uint8 pixels to [0, 1]
    default_trials=("tf:none", "torch:none", "tf:mwms", "torch:ddp"),
    default_workers=(1,),
    target_accuracy=0.70,
    quick_train=2048,
    quick_test=1000,
    warmup_steps=5,
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
