"""The declared task, built in TensorFlow: the one place TF trials get their inputs, loss, optimizer,
schedule, metrics, training step and evaluation from (every TF strategy, tf:ps and the plain script).

Imported only in TF processes. `keras` is Keras 3, or tf_keras for tf:ps (keras#18624).
"""

from __future__ import annotations

import types

import numpy as np

from raylab.data import num_items
from raylab.task import (
    Metric,
    Native,
    NativeContractError,
    Task,
    canonical_loss,
    describe_schedule,
    is_number,
    lr_factor,
    returned,
)
from raylab.task.common import TaskBuilder, built_report, prepare_inputs, prepare_targets, schedule_probe, test_batches


class TFTask(TaskBuilder):
    NATIVE = ("tf", "a TensorFlow tensor", "TensorFlow")

    def __init__(self, task: Task, tf, keras, total_steps: int):
        super().__init__(task, total_steps)
        self.tf, self.keras = tf, keras
        self.m = types.SimpleNamespace(cos=tf.cos, minimum=tf.minimum, maximum=tf.maximum, floor=tf.floor)

    # --- data ---------------------------------------------------------------------------------------
    def inputs(self, x):
        return prepare_inputs(self.task.preprocess, x, "tf")

    def targets(self, y):
        return prepare_targets(y, np.int32)

    # --- model and optimizer ------------------------------------------------------------------------
    def build_model(self, **kwargs):
        return self.task.models["tf"](**kwargs)

    def build_optimizer(self):
        opt, K = self.task.optimizer, self.keras.optimizers
        if isinstance(opt, Native):
            return opt.get("tf")(self.learning_rate(None))
        a = opt.resolved()
        lr = self.learning_rate(opt.lr)
        if opt.name == "sgd":
            return K.SGD(learning_rate=lr, momentum=a["momentum"], nesterov=a["nesterov"])
        adam = dict(learning_rate=lr, beta_1=a["beta_1"], beta_2=a["beta_2"], epsilon=a["epsilon"])
        return K.AdamW(weight_decay=a["weight_decay"], **adam) if opt.name == "adamw" else K.Adam(**adam)

    def learning_rate(self, lr):
        """A float when constant (what a plain Keras script passes), else a schedule on the update count."""
        s, tf = self.task.schedule, self.tf
        if lr is None or (s.name == "constant" and not s.warmup):
            return lr
        total, m = self.total_steps, self.m

        class Schedule(self.keras.optimizers.schedules.LearningRateSchedule):
            def __call__(self, step):
                return lr * lr_factor(s, tf.cast(step, tf.float32), total, m)

            def get_config(self):
                return {"schedule": describe_schedule(s), "lr": lr, "total_steps": total}

        return Schedule()

    # --- loss and metrics ---------------------------------------------------------------------------
    def output_loss(self, output: str, y, pred):
        """One output's per-example loss, shape [batch] (a Keras loss function for that output)."""
        tf, spec = self.tf, self.task.losses()[output]
        if isinstance(spec, Native):
            value = self.native_loss(spec, y, pred, tf.is_tensor)
            if value.shape.rank == 0:  # the batch mean: the same value for every example, as in torch
                value = tf.broadcast_to(value, tf.shape(pred)[:1])
        else:
            value = _loss(tf, canonical_loss(spec), y, pred)
        value = tf.reshape(tf.cast(value, tf.float32), [tf.shape(value)[0], -1])
        return tf.reduce_mean(value, axis=1)

    def batch_stats(self, y, pred):
        """[numerator, denominator] per metric, summed over the batch (ratios of sums, exact over windows)."""
        tf, preds, ys = self.tf, self.named(pred), (y if isinstance(y, dict) else {"": y})
        out = []
        for output, _, spec in self.specs:
            if isinstance(spec, Native):
                value = spec.get("tf")(ys[output], preds[output])
                n = tf.cast(tf.shape(preds[output])[0], tf.float32)
                if isinstance(value, (tuple, list)) and len(value) == 2:
                    out += [self._metric_value(v, spec) for v in value]
                else:
                    out += [self._metric_value(value, spec) * n, n]
            else:
                out += _metric(tf, spec, ys[output], preds[output])
        return tf.cast(tf.stack(out), tf.float32) if out else tf.zeros([0])

    def _metric_value(self, value, spec: Native):
        """A Native metric's batch mean or sum as a float32 scalar: a tensor cast, a Python or numpy number
        made a constant."""
        tf = self.tf
        if tf.is_tensor(value):
            return tf.reshape(tf.cast(value, tf.float32), [])
        if is_number(value):
            return tf.constant(float(value), tf.float32)
        raise NativeContractError(
            f"the recipe's custom metric {spec.describe('tf')} returned {returned(value)}: a metric returns the batch "
            "mean or a (numerator, denominator) pair, each a 0-d tensor or a number."
        )

    def train_step(self, model, optimizer, xb, yb, global_batch: int):
        """One replica's step: [mean loss, metric sums...]. The loss is scaled by the global batch
        because the all-reduce SUMs gradients across replicas."""
        tf = self.tf
        with tf.GradientTape() as tape:
            pred = self.float32(model(xb, training=True))
            per_example = self.per_example_loss(yb, pred)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            # fp16's LossScaleOptimizer: the loss scaled for the gradients, which apply_gradients unscales (Keras 3's
            # other optimizers return the loss as it is; tf:ps's have no scale_loss)
            scale = getattr(optimizer, "scale_loss", None)
            scaled = scale(loss) if scale is not None else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return tf.concat([[tf.reduce_mean(per_example)], self.batch_stats(yb, pred)], 0)

    def float32(self, pred):
        """A mixed-precision model's outputs as float32, for the loss and metrics (float32 ones as they are)."""
        tf = self.tf
        return tf.nest.map_structure(
            lambda t: tf.cast(t, tf.float32) if t.dtype in (tf.bfloat16, tf.float16) else t, pred
        )

    def evaluator(self, model):
        """evaluate(x, y) -> {"val_loss", "val_<metric>"...} over a prepared test split, in batches; or
        evaluate(batches) over an iterable of prepared (x, y) batches (a streamed test split)."""
        tf = self.tf

        @tf.function(reduce_retracing=True)
        def batch(xb, yb):
            pred = self.float32(model(xb, training=False))
            return tf.concat([[tf.reduce_sum(self.per_example_loss(yb, pred))], self.batch_stats(yb, pred)], 0)

        def evaluate(x, y=None):
            n, sums = 0, 0.0
            for xb, yb in test_batches(x, y, self.eval_batch):
                sums, n = sums + batch(xb, yb).numpy().astype(np.float64), n + num_items(yb)
            return self.results(sums, n, "val_")

        return evaluate

    # --- what was built -----------------------------------------------------------------------------
    def built(self, optimizer, x_test) -> dict:
        cfg = optimizer.get_config()
        schedule = getattr(optimizer, "_learning_rate", None)

        def lr_at(step):
            if isinstance(schedule, self.keras.optimizers.schedules.LearningRateSchedule):
                return float(schedule(step))
            return float(cfg["learning_rate"])

        args = {
            "beta_1": cfg.get("beta_1"),
            "beta_2": cfg.get("beta_2"),
            "epsilon": cfg.get("epsilon"),
            "weight_decay": cfg.get("weight_decay"),
            "momentum": cfg.get("momentum"),
            "nesterov": cfg.get("nesterov"),
        }
        return built_report(self.task, type(optimizer).__name__, args, schedule_probe(lr_at, self.total_steps), x_test)


def _loss(tf, name: str, y, pred):
    if name == "sparse_categorical_crossentropy":
        labels = tf.reshape(tf.cast(y, tf.int32), tf.shape(pred)[:-1])
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=pred)
    pred = _like(tf, pred, y)
    y = tf.cast(y, pred.dtype)
    if name == "binary_crossentropy":  # from logits
        return tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=pred)
    return tf.square(pred - y) if name == "mean_squared_error" else tf.abs(pred - y)


def _like(tf, pred, y):
    """A (batch, 1) prediction for a (batch,) target and the like: reshaped to the target's shape."""
    return tf.reshape(pred, tf.shape(y)) if pred.shape.rank != len(y.shape) else pred


def _metric(tf, spec: Metric, y, pred) -> list:
    f32 = tf.float32
    if spec.name in ("accuracy", "top_k_accuracy"):
        if pred.shape[-1] == 1 or spec.name == "accuracy" and pred.shape.rank == len(y.shape) and y.dtype.is_floating:
            hit = tf.equal(tf.reshape(pred, tf.shape(y)) > 0, tf.cast(y, f32) > 0.5)
            return [tf.reduce_sum(tf.cast(hit, f32)), tf.cast(tf.size(hit), f32)]
        labels = tf.reshape(tf.cast(y, tf.int32), [-1])
        logits = tf.reshape(pred, [-1, pred.shape[-1]])
        if spec.name == "accuracy":
            hit = tf.equal(tf.argmax(logits, 1, output_type=tf.int32), labels)
        else:
            hit = tf.math.in_top_k(labels, tf.cast(logits, f32), spec.k)
        return [tf.reduce_sum(tf.cast(hit, f32)), tf.cast(tf.size(labels), f32)]
    pred = tf.cast(_like(tf, pred, y), f32)
    y = tf.cast(y, f32)
    if spec.name in ("mean_absolute_error", "mean_squared_error"):
        err = tf.abs(pred - y) if spec.name == "mean_absolute_error" else tf.square(pred - y)
        return [tf.reduce_sum(err), tf.cast(tf.size(err), f32)]
    p, t = tf.cast(pred > 0, f32), tf.cast(y > 0.5, f32)  # masks from logits and {0, 1} targets
    inter = tf.reduce_sum(p * t)
    if spec.name == "iou":
        return [inter, tf.reduce_sum(tf.maximum(p, t))]
    return [2.0 * inter, tf.reduce_sum(p) + tf.reduce_sum(t)]  # dice


BUILDER = TFTask  # the part every framework has (raylab/registry.py PARTS)
