"""The MLflow params every child run of an invocation shares, trials and plain scripts alike."""

from __future__ import annotations

from raylab.config import Settings
from raylab.data import Dataset
from raylab.task.recipe import Recipe


def common_params(recipe: Recipe, cfg: Settings, ds: Dataset) -> dict:
    """What was asked for: the recipe's task as declared, the run's settings and the data.

    What each worker actually built is recorded beside it as built_* tags; the parity report compares those.
    """
    return {
        "recipe": recipe.name,
        **recipe.task(ds.target_names).describe(),
        "epochs": cfg.epochs,
        "steps_per_epoch": cfg.steps_per_epoch or "one pass",
        "threads": cfg.threads,
        "pin_cpus": cfg.pin_cpus,
        **({"seconds": cfg.seconds} if cfg.seconds is not None else {}),
        "seed": cfg.seed,
        "precision": cfg.precision,
        "device": cfg.device,
        **({"accelerator_type": cfg.accelerator_type} if cfg.accelerator_type else {}),
        "quick": cfg.quick,
        "data": ds.name,
        "data_synthetic": ds.synthetic,
        "train_samples": ds.train_items,
        "test_samples": ds.test_items,
        "data_streamed": ds.streamed,
        "warmup_steps": recipe.warmup_steps,
        "window": cfg.window,
        "target_accuracy": recipe.target(ds),
    }
