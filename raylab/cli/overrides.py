"""Command-line edits of a recipe: --set FIELD=VALUE, --optimizer, --lr and --batch, validated at the door.

Each returns an edited copy of the recipe (Recipe.variant); nothing here starts Ray.
"""

from __future__ import annotations

import dataclasses

from raylab.config import PRECISIONS
from raylab.errors import UserError
from raylab.task import OPTIMIZERS, Optimizer, Schedule

# Recipe fields --set may change, besides optimizer.* and schedule.*: plain values only.
SETTABLE = (
    "batch_per_replica",
    "global_batch",
    "epochs",
    "steps_per_epoch",
    "warmup_steps",
    "quick_train",
    "quick_test",
    "seed",
    "target_accuracy",
    "loss",
    "precision",
)


def parse_batches(text: str | None) -> list[int]:
    """--batch's sizes; "max" (the search, raylab/probes/batchsize.py) is no size: []."""
    from raylab.cli.expand import parse_counts

    return [] if text is None or text.strip() == "max" else parse_counts(text, "--batch", "32,256")


def set_fields(sets: list[str]) -> set[str]:
    """The fields a list of --set items names ('seed', 'optimizer.lr', ...)."""
    return {item.partition("=")[0] for item in sets}


def _value(text: str, like, what: str):
    """`text` as the type of the value it replaces (numbers, booleans, strings)."""
    if isinstance(like, bool):
        if text.lower() not in ("true", "false", "1", "0"):
            raise UserError(f"--set {what}={text}: give true or false.")
        return text.lower() in ("true", "1")
    try:
        if isinstance(like, int) or (like is None and text.lstrip("-").isdigit()):
            return int(text)
        if isinstance(like, float) or like is None:
            return float(text)
    except ValueError:
        kind = "an integer" if isinstance(like, int) else "a number"
        raise UserError(f"--set {what}={text}: {what} takes {kind}.") from None
    return text


def apply_set(recipe, item: str):
    field, sep, text = item.partition("=")
    if not sep or not field:
        raise UserError(f"--set '{item}' is not FIELD=VALUE; e.g. --set epochs=3 or --set optimizer.momentum=0.9.")
    group, _, key = field.partition(".")
    if group == "optimizer" and key:
        opt = recipe.optimizer
        if not isinstance(opt, Optimizer):
            raise UserError(f"--set {field}: the recipe's optimizer is custom (Native); edit it in the recipe.")
        if key == "lr":
            return recipe.variant(optimizer=dataclasses.replace(opt, lr=_value(text, opt.lr, field)))
        if key not in OPTIMIZERS[opt.name]:
            raise UserError(f"--set {field}: {opt.name} takes lr, {', '.join(OPTIMIZERS[opt.name])}.")
        args = {**opt.args, key: _value(text, opt.resolved()[key], field)}
        return recipe.variant(optimizer=dataclasses.replace(opt, args=args))
    if group == "schedule" and key:
        names = [f.name for f in dataclasses.fields(Schedule)]
        if key not in names:
            raise UserError(f"--set {field}: a schedule has {', '.join(names)}.")
        old = getattr(recipe.schedule, key)
        return recipe.variant(schedule=dataclasses.replace(recipe.schedule, **{key: _value(text, old, field)}))
    if field not in SETTABLE:
        raise UserError(
            f"--set {field}: not a field --set can change; use one of {', '.join(SETTABLE)}, "
            "optimizer.ARG or schedule.ARG."
        )
    value = _value(text, getattr(recipe, field), field)
    if field == "precision" and value not in PRECISIONS:
        raise UserError(f"--set precision={text}: use one of {', '.join(PRECISIONS)}.")
    return recipe.variant(**{field: value})


def apply_overrides(recipe, sets: list[str], optimizer: str | None, lr: float | None):
    """--optimizer (keeping the recipe's lr and the arguments the new one takes), then --set items in order,
    then --lr: so `--optimizer sgd --set optimizer.momentum=0.9` works."""
    opt = recipe.optimizer
    if (optimizer or lr is not None) and not isinstance(opt, Optimizer):
        raise UserError("--optimizer / --lr apply to portable optimizers, and this recipe's is custom (Native).")
    if optimizer:
        if optimizer not in OPTIMIZERS:
            raise UserError(f"--optimizer {optimizer}: use one of {', '.join(OPTIMIZERS)}.")
        args = {k: v for k, v in opt.args.items() if k in OPTIMIZERS[optimizer]}
        recipe = recipe.variant(optimizer=Optimizer(optimizer, opt.lr, args))
    for item in sets:
        recipe = apply_set(recipe, item)
    if lr is not None:
        if lr <= 0:
            raise UserError(f"--lr {lr}: the learning rate must be positive.")
        recipe = recipe.variant(optimizer=dataclasses.replace(recipe.optimizer, lr=lr))
    return recipe
