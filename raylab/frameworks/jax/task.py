"""The declared task, built in JAX: the one place jax trials (and the plain script) get their inputs, loss, optimizer,
schedule, metrics and evaluation from. optax builds the optimizer and the learning-rate schedule; the loss and
metrics are jax.numpy functions of (y, pred) that run inside the jitted step.

Imported only in jax processes. Arrays keep the data's layout (channels last, as in TF).

Adam's epsilon sits where torch and optax put it, outside the square root of the bias-corrected second moment
(Keras adds it to the uncorrected root, a slightly different place): the recorded `built_optimizer` says the same
value for all three.
"""

from __future__ import annotations

import types

import numpy as np

from raylab.data import num_items
from raylab.task import Metric, Native, NativeContractError, canonical_loss, is_number, lr_factor, returned
from raylab.task.common import TaskBuilder, built_report, prepare_inputs, prepare_targets, schedule_probe, test_batches


def jnp_math():
    import jax.numpy as jnp

    return types.SimpleNamespace(cos=jnp.cos, minimum=jnp.minimum, maximum=jnp.maximum, floor=jnp.floor)


class JaxTask(TaskBuilder):
    NATIVE = ("jax", "a JAX array", "jax.numpy")

    # --- data ---------------------------------------------------------------------------------------
    def inputs(self, x):
        return prepare_inputs(self.task.preprocess, x, "jax")

    def targets(self, y):
        return prepare_targets(y, np.int32)

    # --- model and optimizer ------------------------------------------------------------------------
    def build_model(self, seed: int):
        """The recipe's Flax NNX module, its parameters drawn from `seed` (the same on every process) and its
        dropout keys from the next one."""
        from flax import nnx

        return self.task.models["jax"](rngs=nnx.Rngs(params=seed, dropout=seed + 1))

    def learning_rate(self, lr: float):
        """A float when constant, else an optax schedule: lr x the task's factor at the update count."""
        s = self.task.schedule
        if s.name == "constant" and not s.warmup:
            return lr
        total, m = self.total_steps, jnp_math()

        def schedule(count):
            import jax.numpy as jnp

            return lr * lr_factor(s, jnp.asarray(count, jnp.float32), total, m)

        return schedule

    def build_optimizer(self):
        """An optax GradientTransformation (a Native one: fn(None) -> it)."""
        import optax

        opt = self.task.optimizer
        if isinstance(opt, Native):
            return opt.get("jax")(None)
        a, lr = opt.resolved(), self.learning_rate(opt.lr)
        if opt.name == "sgd":
            return optax.sgd(lr, momentum=a["momentum"] or None, nesterov=a["nesterov"])
        kw = dict(b1=a["beta_1"], b2=a["beta_2"], eps=a["epsilon"])
        return optax.adamw(lr, weight_decay=a["weight_decay"], **kw) if opt.name == "adamw" else optax.adam(lr, **kw)

    # --- loss and metrics (traced inside the step) ----------------------------------------------------
    def output_loss(self, output: str, y, pred):
        """One output's per-example loss, shape [batch]: averaged over its non-batch axes, in float32."""
        import jax.numpy as jnp

        spec = self.task.losses()[output]
        if isinstance(spec, Native):
            value = self.native_loss(spec, y, pred, _is_array)
            if value.ndim == 0:  # the batch mean: the same value for every example, as in TF and torch
                value = jnp.broadcast_to(value, pred.shape[:1])
        else:
            value = _loss(canonical_loss(spec), y, pred)
        return value.astype(jnp.float32).reshape(value.shape[0], -1).mean(1)

    def batch_stats(self, y, pred):
        """[numerator, denominator] per metric, summed over the batch, as one float32 vector."""
        import jax.numpy as jnp

        preds, ys = self.named(pred), (y if isinstance(y, dict) else {"": y})
        out = []
        for output, _, spec in self.specs:
            if isinstance(spec, Native):
                value = spec.get("jax")(ys[output], preds[output])
                n = jnp.float32(preds[output].shape[0])
                if isinstance(value, (tuple, list)) and len(value) == 2:
                    out += [_metric_value(v, spec) for v in value]
                else:
                    out += [_metric_value(value, spec) * n, n]
            else:
                out += _metric(spec, ys[output], preds[output])
        return jnp.stack(out).astype(jnp.float32) if out else jnp.zeros((0,), jnp.float32)

    def step_stats(self, loss, y, pred):
        """[mean loss, metric sums...] of one training batch."""
        import jax.numpy as jnp

        return jnp.concatenate([loss.reshape(1).astype(jnp.float32), self.batch_stats(y, pred)])

    def evaluator(self, forward, current):
        """evaluate(x, y) -> {"val_loss", "val_<metric>"...} over a prepared (numpy) test split in batches, or
        evaluate(batches) over prepared (x, y) batches (a streamed split). `forward(variables, x)` is the inference
        pass (traced once, jitted here), `current()` the variables it takes now (read at every evaluation). One
        compiled shape per batch size: the last, shorter batch compiles once more."""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def sums(variables, x, y):
            pred = forward(variables, x)
            return jnp.concatenate([self.per_example_loss(y, pred).sum().reshape(1), self.batch_stats(y, pred)])

        def evaluate(x, y=None):
            n, total, variables = 0, 0.0, current()
            for xc, yc in test_batches(x, y, self.eval_batch):
                total, n = total + np.asarray(sums(variables, xc, yc), np.float64), n + num_items(yc)
            return self.results(total, n, "val_")

        return evaluate

    # --- what was built -----------------------------------------------------------------------------
    def built(self, x_test) -> dict:
        opt = self.task.optimizer
        optimizer_name = "custom" if isinstance(opt, Native) else opt.name
        a = {} if isinstance(opt, Native) else opt.resolved()
        if isinstance(opt, Native):  # an optax transformation of the recipe's own: its rate is its own
            return built_report(self.task, "custom", a, "set by the custom optimizer", x_test)
        lr = self.learning_rate(opt.lr)

        def lr_at(step):
            return float(lr(step)) if callable(lr) else lr

        cls = {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD"}[optimizer_name]
        return built_report(self.task, cls, a, schedule_probe(lr_at, self.total_steps), x_test)


def _is_array(value) -> bool:
    """A JAX (or numpy) array, not a Python number: what a custom loss must return."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and not is_number(value)


def _metric_value(value, spec: Native):
    import jax.numpy as jnp

    if hasattr(value, "dtype") and hasattr(value, "reshape"):
        return jnp.asarray(value, jnp.float32).reshape(())
    if is_number(value):
        return jnp.float32(float(value))
    raise NativeContractError(
        f"the recipe's custom metric {spec.describe('jax')} returned {returned(value)}: a metric returns the batch "
        "mean or a (numerator, denominator) pair, each a 0-d array or a number."
    )


def _like(pred, y):
    return pred.reshape(y.shape) if pred.ndim != y.ndim else pred


def _loss(name: str, y, pred):
    import jax.numpy as jnp
    import optax

    if name == "sparse_categorical_crossentropy":  # from logits
        logits = pred.astype(jnp.float32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y.reshape(logits.shape[:-1]).astype(jnp.int32))
    pred = _like(pred, y).astype(jnp.float32)
    y = y.astype(jnp.float32)
    if name == "binary_crossentropy":  # from logits
        return optax.sigmoid_binary_cross_entropy(pred, y)
    return jnp.square(pred - y) if name == "mean_squared_error" else jnp.abs(pred - y)


def _metric(spec: Metric, y, pred) -> list:
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32
    if spec.name in ("accuracy", "top_k_accuracy"):
        floating = jnp.issubdtype(y.dtype, jnp.floating)
        if pred.shape[-1] == 1 or spec.name == "accuracy" and pred.ndim == y.ndim and floating:
            hit = (pred.reshape(y.shape) > 0) == (y > 0.5)
            return [hit.sum(dtype=f32), f32(hit.size)]
        labels = y.reshape(-1)
        logits = pred.reshape(-1, pred.shape[-1])
        if spec.name == "accuracy":
            hit = jnp.argmax(logits, 1) == labels
        else:
            hit = (jax.lax.top_k(logits, spec.k)[1] == labels[:, None]).any(1)
        return [hit.sum(dtype=f32), f32(labels.size)]
    pred, y = _like(pred, y).astype(f32), y.astype(f32)
    if spec.name in ("mean_absolute_error", "mean_squared_error"):
        err = jnp.abs(pred - y) if spec.name == "mean_absolute_error" else jnp.square(pred - y)
        return [err.sum(), f32(err.size)]
    p, t = (pred > 0).astype(f32), (y > 0.5).astype(f32)
    inter = (p * t).sum()
    if spec.name == "iou":
        return [inter, jnp.maximum(p, t).sum()]
    return [2.0 * inter, p.sum() + t.sum()]


BUILDER = JaxTask  # the part every framework has (raylab/registry.py PARTS)
