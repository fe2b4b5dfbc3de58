"""The task a recipe declares once, framework-free (declared.py: preprocessing, loss, optimizer, schedule, metrics,
Native and the checks), what the framework builders share (common.py), a built model's settings
(model_settings.py) and the recipes a user writes (recipe.py). This module only re-exports."""

from raylab.task.declared import (
    LOSSES,
    LOSS_ALIASES,
    OPTIMIZERS,
    SCHEDULES,
    METRICS,
    METRIC_ALIASES,
    Native,
    NativeContractError,
    is_number,
    returned,
    Optimizer,
    optimizer,
    Schedule,
    lr_factor,
    PY_MATH,
    Metric,
    Scale,
    Task,
    canonical_loss,
    metric,
    describe_schedule,
    describe_preprocess,
    check,
)
