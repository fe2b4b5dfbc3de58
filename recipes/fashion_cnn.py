"""Fashion-MNIST 5-layer CNN: three BatchNorm-Conv 5x5-ELU-MaxPool-Dropout blocks, Dense 256, Dense 10.

Conv 64 / 128 / 256 (5x5, same padding, ELU), each after BatchNorm and followed by MaxPool 2x2 and
Dropout 0.25; Flatten, Dense 256 ELU, Dropout 0.5, Dense 10: 1,619,084 trainable parameters in TF,
torch and JAX alike. Adam lr 1e-3, global batch 1024 (split over the replicas), 5 epochs x 100 steps, as in
the seed notebook. BatchNorm momentum 0.9 (torch: 0.1, the same average) and epsilon 1e-3 in every
framework: with Keras' default 0.99 the moving averages still weigh their initial values by 0.99^60 = 0.55
after one pass, and the test accuracy (inference mode) says more about that than about the model.
Kernels start U(+-1/sqrt(fan_in)) in every framework (torch's default; Keras VarianceScaling(1/3, fan_in,
uniform)), biases zero: after one pass (58 steps) that gave 0.859 (TF) / 0.843 (torch) test accuracy,
against 0.838 / 0.819 with Glorot-uniform and 0.807 (TF) with He-uniform.

    python recipes/fashion_cnn.py                                    # tf:none and torch:none, 5 x 100 steps
    python recipes/fashion_cnn.py --epochs 1 --steps-per-epoch 0     # one pass over the data (58 steps)
    python recipes/fashion_cnn.py --trials tf:mwms,torch:ddp --workers 2 --quick
"""

from raylab import Recipe, Scale, main, optimizer
from raylab.data import fashion_mnist

BN_MOMENTUM_KERAS, BN_EPSILON = 0.9, 1e-3  # torch's momentum is 1 - Keras'


def tf_model(keras=None):
    if keras is None:  # Keras 3; tf:ps passes tf_keras
        import keras

    L = keras.layers
    init = dict(
        kernel_initializer=keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform"), bias_initializer="zeros"
    )

    def block(filters):
        return [
            L.BatchNormalization(momentum=BN_MOMENTUM_KERAS, epsilon=BN_EPSILON),
            L.Conv2D(filters, 5, padding="same", activation="elu", **init),
            L.MaxPooling2D(2),
            L.Dropout(0.25),
        ]

    return keras.Sequential(
        [
            keras.Input((28, 28)),
            L.Reshape((28, 28, 1)),
            *block(64),
            *block(128),
            *block(256),
            L.Flatten(),
            L.Dense(256, activation="elu", **init),
            L.Dropout(0.5),
            L.Dense(10, **init),
        ]
    )


def torch_model():
    from torch import nn

    def block(cin, cout):
        return [
            nn.BatchNorm2d(cin, momentum=1 - BN_MOMENTUM_KERAS, eps=BN_EPSILON),
            nn.Conv2d(cin, cout, 5, padding="same"),
            nn.ELU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
        ]

    model = nn.Sequential(
        nn.Unflatten(1, (1, 28)),
        *block(1, 64),
        *block(64, 128),
        *block(128, 256),  # (N,28,28) -> (N,1,28,28)
        nn.Flatten(),
        nn.Linear(256 * 3 * 3, 256),
        nn.ELU(),
        nn.Dropout(0.5),
        nn.Linear(256, 10),
    )
    for layer in model:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):  # U(+-1/sqrt(fan_in)) as on the Keras side
            nn.init.kaiming_uniform_(layer.weight, a=5**0.5)
            nn.init.zeros_(layer.bias)
    return model


def jax_model(rngs):
    from flax import nnx

    init = dict(
        kernel_init=nnx.initializers.variance_scaling(1 / 3, "fan_in", "uniform"),
        bias_init=nnx.initializers.zeros_init(),
        rngs=rngs,
    )

    class CNN(nnx.Module):
        def __init__(self):
            widths = [(1, 64), (64, 128), (128, 256)]
            self.norms = nnx.List(
                [nnx.BatchNorm(cin, momentum=BN_MOMENTUM_KERAS, epsilon=BN_EPSILON, rngs=rngs) for cin, _ in widths]
            )
            self.convs = nnx.List([nnx.Conv(cin, cout, (5, 5), padding="SAME", **init) for cin, cout in widths])
            self.dense, self.out = nnx.Linear(256 * 3 * 3, 256, **init), nnx.Linear(256, 10, **init)
            self.drop_block, self.drop_dense = nnx.Dropout(0.25, rngs=rngs), nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):
            x = x[..., None]  # (N, 28, 28) -> (N, 28, 28, 1): channels last, as in Keras
            for norm, conv in zip(self.norms, self.convs):
                x = self.drop_block(nnx.max_pool(nnx.elu(conv(norm(x))), (2, 2), (2, 2)))
            x = self.drop_dense(nnx.elu(self.dense(x.reshape(x.shape[0], -1))))
            return self.out(x)

    return CNN()


RECIPE = Recipe(
    name="fashion_cnn",
    data=fashion_mnist,
    models={"tf": tf_model, "torch": torch_model, "jax": jax_model},
    batch_per_replica=1024,
    global_batch=1024,
    steps_per_epoch=100,
    epochs=5,
    loss="sparse_categorical_crossentropy",  # from logits
    optimizer=optimizer("adam", 1e-3, epsilon=1e-7),  # Keras' epsilon, in every framework
    metrics=("accuracy",),
    preprocess=Scale(1 / 255),  # uint8 pixels to [0, 1]
    default_trials=("tf:none", "torch:none"),
    default_workers=(1,),
    target_accuracy=0.88,
    quick_train=2048,  # 2 steps of 1024
    quick_test=500,
    warmup_steps=3,
    doc=__doc__,
)

if __name__ == "__main__":
    main(RECIPE)
