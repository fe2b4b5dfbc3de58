"""Plain TensorFlow baseline: the fashion MLP, no Ray, no raylab, one process.

Same model (Keras 3, Glorot-uniform kernels, zero biases), Adam 5e-4 / epsilon 1e-7, batch 32,
1 intra-op and 1 inter-op thread, the same custom loop (tf.function step, loss read back every
step) and the same timing as raylab's tf trials. Prints one JSON line.

    python bench/plain_tf.py --epochs 2
"""

import os
import time

from common import fashion_train, parse_args, report

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""


def main():
    args = parse_args(__doc__)

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    keras.utils.set_random_seed(0)
    x, y = fashion_train(args.data)
    y = y.astype("int32")
    batch, steps = 32, len(x) // 32
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat()
    it = iter(ds.batch(batch, drop_remainder=True).prefetch(2))
    dense = dict(kernel_initializer="glorot_uniform", bias_initializer="zeros")
    model = keras.Sequential([keras.Input((28, 28)), keras.layers.Flatten(),
                              keras.layers.Dense(128, activation="relu", **dense), keras.layers.Dropout(0.2),
                              keras.layers.Dense(10, **dense)])
    opt = keras.optimizers.Adam(learning_rate=5e-4, epsilon=1e-7)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step():
        xb, yb = next(it)  # inside the function, as raylab's loop does: no host round trip per batch
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), yb), tf.float32))
        return tf.stack([loss, correct])

    times = []
    for _ in range(args.epochs * steps):
        t0 = time.perf_counter()
        train_step().numpy()
        times.append(time.perf_counter() - t0)
    report("plain_tf", times, args.warmup, batch)


if __name__ == "__main__":
    main()
