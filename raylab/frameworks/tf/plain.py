"""TensorFlow's plain script (raylab/frameworks/plain.py): Keras `compile(steps_per_execution=K)` and `fit`, K = the
trial's --window, loss only (no training metrics: less work than the trial does); `jit_compile` set as the trial
executes (False beside tf.function, True beside XLA) and recorded."""

from __future__ import annotations

import os
import time

import numpy as np

from raylab.frameworks.plain import arrays, steps_of, timed
from raylab.timing import Chrono


def env(threads: int) -> dict:
    """What the plain script's process needs in its environment beside the threads: nothing more."""
    return {}


def run(spec, task, x, y, xt, yt) -> dict:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from raylab.frameworks.tf.task import TFTask

    keras.utils.set_random_seed(spec["seed"])
    n = len(next(iter(arrays(x))))
    steps = steps_of(spec, n)
    tt = TFTask(task, tf, keras, steps * spec["epochs"])
    tt.eval_batch = spec["batch"]  # evaluation in the trial's batches, as the trials do
    x, y, xt, yt = tt.inputs(x), tt.targets(y), tt.inputs(xt), tt.targets(yt)
    model, opt = tt.build_model(), tt.build_optimizer()
    loss, weights, y_fit = _losses(task, tt, y)
    # jit_compile as the trial: False for its tf.function steps, True for XLA (Keras' "auto" would pick for us)
    model.compile(
        optimizer=opt,
        loss=loss,
        loss_weights=weights,
        steps_per_execution=spec["window"],
        jit_compile=spec.get("execution") == "xla",
    )
    ds = tf.data.Dataset.from_tensor_slices((x, y_fit)).shuffle(n, seed=spec["seed"]).repeat()
    ds = ds.batch(spec["batch"], drop_remainder=True).prefetch(2)
    evaluate, chrono, epochs, start = tt.evaluator(model), Chrono(spec["start"], spec["warmup"]), [], time.time()

    clock = _clock(keras, chrono, epochs, evaluate, xt, yt, start)
    model.fit(ds, epochs=spec["epochs"], steps_per_epoch=steps, callbacks=[clock], verbose=0)
    params = int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    # first_step_s: the first call's time (it traces the step function), not that call's mean step
    return {
        **timed(chrono, spec["batch"], spec.get("trace")),
        "first_step_s": chrono.windows[0][0],
        "epochs": epochs,
        "parameters": params,
        "steps_per_epoch": steps,
        "jit_compile": bool(model.jit_compile),
        "steps_per_call": spec["window"],
        **tt.built(opt, xt),
        "execution": "xla" if model.jit_compile else "tf.function",
    }


def _losses(task, tt, y):
    """(Keras loss, loss weights, targets to fit): the task's per-example loss, or one Keras loss per named output,
    in the order the model returns them."""
    outputs = list(task.losses())
    if outputs == [""]:
        return tt.per_example_loss, None, y
    loss = [lambda a, b, o=o: tt.output_loss(o, a, b) for o in outputs]
    weights = [(task.loss_weights or {}).get(o, 1.0) for o in outputs]
    return loss, weights, tuple(y[o] for o in outputs)


def _clock(keras, chrono, epochs: list, evaluate, xt, yt, start: float):
    """A Keras callback that times each steps_per_execution call and evaluates at each epoch's end into `epochs`."""

    class Clock(keras.callbacks.Callback):
        """Times each steps_per_execution call: not async-safe, so Keras reads the logs (a host read) there."""

        def on_epoch_begin(self, epoch, logs=None):
            self.done = 0
            chrono.start()

        def on_train_batch_end(self, batch, logs=None):
            chrono.stop(batch + 1 - self.done)
            self.done = batch + 1
            chrono.start()

        def on_epoch_end(self, epoch, logs=None):
            epochs.append({"epoch": epoch + 1, **evaluate(xt, yt), "elapsed_s": time.time() - start})

    return Clock()
