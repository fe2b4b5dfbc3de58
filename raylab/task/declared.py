"""The training task a recipe declares once: preprocessing, loss, optimizer, schedule, metrics.

Everything here is framework-free and picklable: it travels to the workers as declared, and each framework's
`raylab/frameworks/<name>/task.py` builds the same thing from it (the only places that know how a portable name
maps onto a framework). A recipe may use portable names or bring its own callables per framework with
`Native(tf=..., torch=..., jax=...)`.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from raylab.errors import UserError
from raylab.task.preprocess import Cast, Scale

LOSSES = ("sparse_categorical_crossentropy", "binary_crossentropy", "mean_squared_error", "mean_absolute_error")
LOSS_ALIASES = {"mse": "mean_squared_error", "mae": "mean_absolute_error"}
# name -> {argument: default}; every default is spelled out so TF and torch get the same value
# (Keras' Adam epsilon is 1e-7 and torch's 1e-8; Keras' AdamW weight decay 0.004 and torch's 0.01).
OPTIMIZERS = {
    "adam": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "adamw": {"beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7, "weight_decay": 0.01},
    "sgd": {"momentum": 0.0, "nesterov": False},
}
SCHEDULES = ("constant", "cosine", "step")
METRICS = ("accuracy", "top_k_accuracy", "mean_absolute_error", "mean_squared_error", "iou", "dice")
METRIC_ALIASES = {"mae": "mean_absolute_error", "mse": "mean_squared_error"}


@dataclass(frozen=True)
class Native:
    """A callable per framework, where a portable name does not fit: Native(tf=fn, torch=fn, jax=fn).

    Loss: fn(y_true, y_pred) -> the framework's tensor: per-example loss ([batch]) or the batch mean (a scalar).
    Metric: fn(y_true, y_pred) -> the batch mean, or a (numerator, denominator) pair of sums; each a 0-d tensor
    or a Python or numpy number. (jax: jax.numpy arrays, traced inside the jitted step.)
    Optimizer: fn(lr) -> (tf) a Keras optimizer, fn(params, lr) -> (torch) a torch optimizer, or fn(lr) -> (jax)
    an optax GradientTransformation (lr is None: the function picks its own).
    Preprocess: fn(x) -> x, on the worker's numpy shard (every framework alike) once per trial.
    """

    tf: Callable | None = None
    torch: Callable | None = None
    jax: Callable | None = None
    name: str = "custom"  # how it is recorded

    def describe(self, family: str) -> str:
        fn = getattr(self, family)
        return f"`{self.name}` ({getattr(fn, '__qualname__', repr(fn))})"

    def get(self, family: str) -> Callable:
        fn = getattr(self, family)
        if fn is None:
            raise UserError(f"the recipe's custom {self.name} has no {family} version; add Native({family}=...).")
        return fn


class NativeContractError(TypeError):
    """A Native function returned what its contract (above) does not allow: one line naming it and what it gave."""


def is_number(value) -> bool:
    """A Python or numpy number (a 0-d array included): what a Native metric may return for a tensor."""
    import numbers

    import numpy as np

    return isinstance(value, numbers.Number) or isinstance(value, np.ndarray) and value.ndim == 0


def returned(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


@dataclass(frozen=True)
class Optimizer:
    """A portable optimizer: adam, adamw or sgd, its learning rate and arguments (see OPTIMIZERS)."""

    name: str
    lr: float
    args: dict = field(default_factory=dict)

    def resolved(self) -> dict:
        """Every argument with its default filled in: what each framework is given."""
        return {**OPTIMIZERS[self.name], **self.args}


def optimizer(name: str, lr: float, **args) -> Optimizer:
    """optimizer("sgd", 0.01, momentum=0.9): validated when the recipe is checked."""
    return Optimizer(name, lr, dict(args))


@dataclass(frozen=True)
class Schedule:
    """The learning rate as a factor of the optimizer's, per optimizer update (step counts from 0).

    constant: 1. cosine: from 1 down to `floor` over the steps after warm-up (all the run's steps
    unless `decay_steps`). step: x `gamma` every `every` steps. Any of them: `warmup` steps of
    linear warm-up first, from 1/warmup up to 1.
    """

    name: str = "constant"
    warmup: int = 0
    decay_steps: int | None = None  # cosine: None = the rest of the run
    floor: float = 0.0  # cosine: the final factor
    every: int = 1000  # step: steps between decays
    gamma: float = 0.1  # step: the decay factor


def lr_factor(s: Schedule, step, total_steps: int, m=None):
    """The factor at optimizer update `step`, written once for both frameworks.

    `m` supplies cos / minimum / maximum / floor: Python's math here and in torch's LambdaLR, tf's ops
    inside a Keras LearningRateSchedule (where `step` is a float tensor).
    """
    m = m or PY_MATH
    warm = m.minimum(1.0, (step + 1.0) / s.warmup) if s.warmup else 1.0
    if s.name == "constant":
        return warm * 1.0
    if s.name == "step":
        return warm * s.gamma ** m.floor(step / s.every)
    span = float(s.decay_steps or max(total_steps - s.warmup, 1))
    t = m.minimum(m.maximum(step - s.warmup, 0.0), span) / span
    return warm * (s.floor + (1.0 - s.floor) * 0.5 * (1.0 + m.cos(math.pi * t)))


PY_MATH = types.SimpleNamespace(cos=math.cos, minimum=min, maximum=max, floor=math.floor)


@dataclass(frozen=True)
class Metric:
    """A portable metric: a name from METRICS, and `k` for top_k_accuracy."""

    name: str
    k: int = 5

    @property
    def label(self) -> str:
        return f"top_{self.k}_accuracy" if self.name == "top_k_accuracy" else self.name


@dataclass(frozen=True)
class Task:
    """What a worker needs to build the task in its framework; derived from a Recipe (Recipe.task)."""

    models: dict  # whose builder ("tf", "torch", "jax": a Framework.models) -> builder
    loss: Any  # a name, Native, or {output: name | Native}
    optimizer: Any  # Optimizer or Native
    schedule: Schedule = Schedule()
    metrics: Any = ()  # names / Metric / Native, or {output: [...]}
    loss_weights: dict | None = None  # {output: weight} for a sum over named outputs
    preprocess: Any = None  # None (inputs cast to float32, never scaled), Scale, a numpy function, or Native
    outputs: tuple[str, ...] = ()  # named outputs, in the order a model returns them; () = one output

    def losses(self) -> dict:
        """{output or "": loss spec}."""
        return dict(self.loss) if isinstance(self.loss, dict) else {"": self.loss}

    def metric_specs(self) -> list[tuple[str, str, Any]]:
        """[(output or "", recorded name, Metric | Native)] in a fixed order."""
        per = self.metrics if isinstance(self.metrics, dict) else {"": self.metrics}
        out = []
        for output, specs in per.items():
            for spec in [specs] if isinstance(specs, (str, Metric, Native)) else list(specs):
                spec = metric(spec)
                label = spec.name if isinstance(spec, Native) else spec.label
                out.append((output, f"{output}_{label}" if output else label, spec))
        return out

    def metric_names(self) -> list[str]:
        return [name for _, name, _ in self.metric_specs()]

    def with_optimizer(self, **changes) -> "Task":
        return replace(self, optimizer=replace(self.optimizer, **changes))

    def describe(self) -> dict:
        """What the recipe declared, as MLflow params (the built objects are reported by the workers)."""
        opt = self.optimizer
        losses = {k: (v.name if isinstance(v, Native) else canonical_loss(v)) for k, v in self.losses().items()}
        pre = self.preprocess
        return {
            "loss": ",".join(f"{k}={v}" if k else v for k, v in losses.items()),
            **(
                {"loss_weights": ",".join(f"{k}={w:g}" for k, w in self.loss_weights.items())}
                if self.loss_weights
                else {}
            ),
            "optimizer": opt.name if isinstance(opt, (Optimizer, Native)) else str(opt),
            **(
                {"lr": opt.lr, **{f"opt_{k}": v for k, v in opt.resolved().items()}}
                if isinstance(opt, Optimizer)
                else {}
            ),
            "schedule": describe_schedule(self.schedule),
            "metrics": ",".join(self.metric_names()) or "none",
            "preprocess": describe_preprocess(pre),
        }


def canonical_loss(name: str) -> str:
    return LOSS_ALIASES.get(name, name)


def metric(spec) -> Metric | Native:
    if isinstance(spec, (Metric, Native)):
        return spec
    name = METRIC_ALIASES.get(spec, spec)
    if name.startswith("top_") and name.endswith("_accuracy") and name[4:-9].isdigit():
        return Metric("top_k_accuracy", int(name[4:-9]))
    return Metric(name)


def describe_schedule(s: Schedule) -> str:
    warm = f", warmup={s.warmup}" if s.warmup else ""
    if s.name == "cosine":
        return f"cosine(floor={s.floor:g}, decay_steps={s.decay_steps or 'rest of run'}{warm})"
    if s.name == "step":
        return f"step(every={s.every}, gamma={s.gamma:g}{warm})"
    return f"constant({warm[2:]})" if warm else "constant"


def describe_preprocess(pre) -> str:
    if pre is None:
        return "none (cast to float32)"
    if isinstance(pre, (Scale, Cast)):
        return pre.describe()
    if isinstance(pre, Native):
        return f"custom ({pre.name})"
    return f"custom ({getattr(pre, '__name__', type(pre).__name__)})"


def check(task: Task, target_names: tuple[str, ...], input_dtypes: dict | None = None) -> None:
    """Every portable name known, every argument valid, outputs consistent, a Cast that keeps the inputs' values
    (input_dtypes: {input name or None: dtype name}, where the data is in memory): UserError otherwise."""
    if isinstance(task.preprocess, Cast) and input_dtypes is not None:
        task.preprocess.check(input_dtypes)
    named = set(target_names)
    for output, loss in task.losses().items():
        if output and output not in named:
            raise UserError(
                f"the loss names output '{output}', but the data's targets are {sorted(named) or 'one array'}; "
                "name the outputs as the y_train dict's keys."
            )
        if not isinstance(loss, Native) and canonical_loss(loss) not in LOSSES:
            raise UserError(
                f"unknown loss '{loss}'; use one of {', '.join(LOSSES)} (or mse / mae), or Native(tf=..., torch=...)."
            )
    if named and not isinstance(task.loss, (dict, Native)):
        raise UserError(
            f"the targets are named ({', '.join(target_names)}): give the loss as a dict, one loss per output."
        )
    if task.loss_weights and set(task.loss_weights) - set(task.losses()):
        raise UserError(
            f"loss_weights names {sorted(set(task.loss_weights) - set(task.losses()))}, which have no loss."
        )
    _check_optimizer(task.optimizer)
    _check_schedule(task.schedule)
    for output, name, spec in task.metric_specs():
        if output and output not in named:
            raise UserError(f"metric '{name}' names output '{output}', which the targets do not have.")
        if isinstance(spec, Metric) and spec.name not in METRICS:
            raise UserError(
                f"unknown metric '{spec.name}'; use one of {', '.join(METRICS)} (or mae / mse / top_5_accuracy), "
                "or Native(tf=..., torch=...)."
            )


def _check_optimizer(opt) -> None:
    if isinstance(opt, Native):
        return
    if not isinstance(opt, Optimizer) or opt.name not in OPTIMIZERS:
        name = getattr(opt, "name", opt)
        raise UserError(f"unknown optimizer '{name}'; use one of {', '.join(OPTIMIZERS)} or Native(tf=..., torch=...).")
    extra = set(opt.args) - set(OPTIMIZERS[opt.name])
    if extra:
        raise UserError(
            f"optimizer {opt.name} takes {', '.join(OPTIMIZERS[opt.name])}, not {', '.join(sorted(extra))}."
        )
    if not (isinstance(opt.lr, (int, float)) and opt.lr > 0):
        raise UserError(f"the learning rate is {opt.lr}; it must be a positive number (e.g. --lr 1e-3).")


def _check_schedule(s: Schedule) -> None:
    if s.name not in SCHEDULES:
        raise UserError(f"unknown schedule '{s.name}'; use one of {', '.join(SCHEDULES)} (each takes warmup=N).")
    if s.warmup < 0 or s.every < 1 or (s.decay_steps is not None and s.decay_steps < 1):
        raise UserError(f"schedule {describe_schedule(s)}: warmup must be >= 0, every and decay_steps >= 1.")
