"""What every framework's task builder shares: output naming, the weighted per-example loss, a recipe's own loss held to
its contract, numpy-side data preparation and the built-task report."""

from __future__ import annotations

import math

import numpy as np

from raylab.data import num_items, tree_map
from raylab.task import OPTIMIZERS, Cast, Native, NativeContractError, Scale, Task, describe_preprocess, returned

EVAL_BATCH_BYTES = 8_000_000  # an evaluation batch holds at most this much input (1000 28x28 images, 72 96x96x3)
PORTABLE_NAMES = {"Adam": "adam", "AdamW": "adamw", "SGD": "sgd"}  # optimizer class -> portable name


class TaskBuilder:
    """What every framework's builder shares: output naming, the loss over outputs, turning metric sums into figures."""

    def __init__(self, task: Task, total_steps: int):
        self.task, self.total_steps = task, max(total_steps, 1)  # total_steps: optimizer updates in the run
        self.specs = task.metric_specs()
        # Evaluation batches hold at most this many items (the trial's batch per replica): a model that trains at
        # a batch evaluates at it (no gradients, less memory), whatever the memory left (--batch max, a cap).
        self.eval_batch: int | None = None

    def named(self, pred) -> dict:
        """The model's output(s) by output name ("" for a single output); a tuple or list maps in order."""
        if isinstance(pred, dict):
            return pred
        if isinstance(pred, (list, tuple)):
            return dict(zip(self.task.outputs, pred)) if self.task.outputs else {"": pred[0]}
        return {"": pred}

    # A recipe's own loss, in this builder's framework: (its name, what its arrays are called, what a loss is written
    # in), set by each framework's builder
    NATIVE: tuple[str, str, str] = ("", "an array", "the framework")

    def per_example_loss(self, y, pred):
        """Shape [batch]: each output's loss averaged over its non-batch axes (the framework's `output_loss`),
        weighted and summed."""
        preds, ys = self.named(pred), (y if isinstance(y, dict) else {"": y})
        weights, total = self.task.loss_weights or {}, 0.0
        for output in self.task.losses():
            total = total + weights.get(output, 1.0) * self.output_loss(output, ys[output], preds[output])
        return total

    def output_loss(self, output: str, y, pred):
        """One output's per-example loss, shape [batch], in the framework's arrays."""
        raise NotImplementedError

    def native_loss(self, spec: Native, y, pred, is_array):
        """A recipe's own loss (Native) of one output, held to its contract: the framework's array (`is_array`), so
        that it has gradients."""
        name, array, language = self.NATIVE
        value = spec.get(name)(y, pred)
        if not is_array(value):
            raise NativeContractError(
                f"the recipe's custom loss {spec.describe(name)} returned {returned(value)}, not {array}: a loss "
                f"must be computed from y_pred in {language} (one value per example, or the batch mean) so that it "
                "has gradients."
            )
        return value

    def results(self, sums, n_or_steps: float, prefix: str) -> dict:
        """[loss total, numerator, denominator, ...] -> {prefix+"loss": total / n, prefix+metric: ratio}."""
        out = {f"{prefix}loss": float(sums[0]) / n_or_steps}
        for i, (_, name, _) in enumerate(self.specs):
            num, den = sums[1 + 2 * i], sums[2 + 2 * i]
            out[f"{prefix}{name}"] = float(num / den) if den else float("nan")
        return out


def prepare_inputs(preprocess, x, family: str):
    """The recipe's preprocessing on a numpy shard; without one, inputs are only cast to float32."""
    if preprocess is None:
        return tree_map(lambda a: a.astype(np.float32, copy=False), x)
    if isinstance(preprocess, Cast):  # dict-aware itself: each named input takes its own dtype
        return preprocess(x)
    if isinstance(preprocess, Scale):
        return tree_map(preprocess, x)
    fn = preprocess.get(family) if isinstance(preprocess, Native) else preprocess
    return fn(x)


def prepare_targets(y, int_dtype):
    """Class labels as the framework's index type, everything else float32."""
    return tree_map(lambda a: a.astype(int_dtype if a.dtype.kind in "biu" else np.float32, copy=False), y)


def test_batches(x, y=None, most: int | None = None):
    """The test split's batches for evaluation: (x, y) arrays cut into eval_batch_size pieces (at most `most`
    items), or, when y is None, x itself: an iterable of prepared (x, y) batches (a streamed test split)."""
    if y is None:
        yield from x
        return
    n = num_items(x)
    size = min(eval_batch_size(x), most or eval_batch_size(x))
    for i in range(0, n, size):
        yield tree_map(lambda a: a[i : i + size], x), tree_map(lambda a: a[i : i + size], y)


def eval_batch_size(x) -> int:
    arrays = x.values() if isinstance(x, dict) else [x]
    per_item = sum(4 * int(np.prod(a.shape[1:])) for a in arrays)
    return max(1, min(1000, EVAL_BATCH_BYTES // max(per_item, 1)))


def schedule_probe(lr_at, total_steps: int) -> str:
    """The learning rate the built optimizer uses at 0, 25, 50, 75 and 100% of the run's updates.

    To 4 significant digits of the largest of them: TF computes its schedule in float32 and torch in
    float64, and far below the peak (a cosine's end, where 1 + cos cancels; a step decay's tail) they part
    beyond float32's precision, which finer figures would show as a parity mismatch. Each value is first
    read to 6 digits, so that the two frameworks' versions of a round number (4.05e-4) round alike.
    """
    points = (0, 25, 50, 75, 100)
    values = [float(f"{lr_at(round(p / 100 * (total_steps - 1))):.6g}") for p in points]
    top = float(f"{max(abs(v) for v in values):.4g}")
    unit = 10.0 ** (math.floor(math.log10(top)) - 3) if top > 0 else 1.0
    return ", ".join(f"{p}%={round(v / unit) * unit:.4g}" for p, v in zip(points, values))


def input_summary(x) -> str:
    arrays = [np.asarray(a) for a in (x.values() if isinstance(x, dict) else [x])]  # numpy or cpu tensors
    lo, hi = min(float(np.min(a)) for a in arrays), max(float(np.max(a)) for a in arrays)
    return f"test inputs {dtypes_shown(arrays)} in [{lo:.4g}, {hi:.4g}]"


def dtypes_shown(arrays) -> str:
    """The arrays' dtypes as the workers hold them, "/"-joined where they differ: what the model is fed."""
    return "/".join(dict.fromkeys(str(a.dtype) for a in arrays))


def _preprocess(task: Task, x):
    """The preprocessing and the range of the test inputs it made; of a streamed test split (x.summary: the range
    rank 0's evaluations saw) a function the loop calls when the trial reports."""
    pre = describe_preprocess(task.preprocess)
    if hasattr(x, "summary"):
        return lambda: f"{pre}; {x.summary()}"
    return f"{pre}; {input_summary(x)}"


def built_report(task: Task, opt_class: str, args: dict, lr_probe: str, x_test_prepared) -> dict:
    """What a worker built, in portable terms, so trials of different frameworks can be compared
    (the parity report of `raylab compare` reads these tags)."""
    name = PORTABLE_NAMES.get(opt_class, opt_class)
    keys = OPTIMIZERS.get(name, {})
    shown = ", ".join(f"{k}={_fmt(args.get(k))}" for k in keys)
    return {
        "built_optimizer": f"{name}({shown})" if shown else name,
        "built_optimizer_class": opt_class,
        "built_lr_schedule": lr_probe,
        "built_loss": task.describe()["loss"]
        + (f" weights {task.describe()['loss_weights']}" if task.loss_weights else ""),
        "built_metrics": ",".join(task.metric_names()) or "none",
        "built_preprocess": _preprocess(task, x_test_prepared),
    }


def _fmt(value) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    return f"{float(value):.6g}" if isinstance(value, (int, float, np.floating)) else str(value)
