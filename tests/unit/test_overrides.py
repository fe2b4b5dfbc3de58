"""--batch, --lr, --optimizer and --set: what people sweep, validated before Ray starts."""

from __future__ import annotations

import pytest

from raylab import cli
from raylab.errors import UserError
from raylab.task import Schedule
from tests.unit.test_config import RECIPE, no_ray  # noqa: F401 - a fixture, used by name


def edited(*argv):
    args = cli.recipe_parser(RECIPE).parse_args(list(argv))
    recipe = cli.edited(RECIPE, args)
    return recipe, cli.make_config(recipe, args)


def test_batch_sweep_runs_every_trial_at_each_size_and_names_it():
    _, cfg = edited("--trials", "tf:none,torch:ddp", "--workers", "1,2", "--batch", "32,256")
    assert [s.name for s in cfg.trials] == [
        "tf:none x1 b32",
        "torch:ddp x1 b32",
        "torch:ddp x2 b32",
        "tf:none x1 b256",
        "torch:ddp x1 b256",
        "torch:ddp x2 b256",
    ]
    assert RECIPE.with_batch(256).per_replica(2) == 256  # weak scaling: per replica
    recipe, cfg = edited("--trials", "tf:none", "--batch", "64")  # one size: the recipe's batch, no suffix
    assert recipe.batch_per_replica == 64 and [s.name for s in cfg.trials] == ["tf:none x1"]


def test_lr_optimizer_and_set_edit_the_task():
    recipe, _ = edited(
        "--optimizer",
        "sgd",
        "--lr",
        "0.1",
        "--set",
        "optimizer.momentum=0.9",
        "--set",
        "schedule.name=cosine",
        "--set",
        "schedule.warmup=50",
        "--set",
        "epochs=3",
    )
    assert recipe.epochs == 3 and recipe.schedule == Schedule("cosine", warmup=50)
    assert (recipe.optimizer.name, recipe.optimizer.lr) == ("sgd", 0.1)


def test_set_optimizer_arguments_after_choosing_it():
    recipe, _ = edited("--set", "optimizer.epsilon=1e-8", "--lr", "0.003")
    assert recipe.optimizer.resolved()["epsilon"] == 1e-8 and recipe.optimizer.lr == 0.003
    described = recipe.task().describe()
    assert described["opt_epsilon"] == 1e-8 and described["lr"] == 0.003


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--batch", "32,x"], "--batch '32,x' is not a list of integers"),
        (["--batch", "0"], "--batch '0' must list counts of at least 1"),
        (["--lr", "-1"], "must be positive"),
        (["--set", "epochs"], "is not FIELD=VALUE"),
        (["--set", "models=none"], "not a field --set can change"),
        (["--set", "epochs=three"], "epochs takes an integer"),
        (["--set", "optimizer.momentum=0.9"], "adam takes lr, beta_1, beta_2, epsilon"),
        (["--set", "schedule.period=3"], "a schedule has name, warmup"),
        (["--set", "schedule.name=exponential"], "unknown schedule 'exponential'"),
        (["--set", "loss=hinge"], "unknown loss 'hinge'"),
    ],
)
def test_bad_values_exit_2_with_one_line_before_ray(no_ray, argv, message, capsys):  # noqa: F811
    assert cli.recipe_main(RECIPE, ["--trials", "tf:none", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_unknown_optimizer_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.recipe_parser(RECIPE).parse_args(["--optimizer", "lamb"])
    assert exit_info.value.code == 2 and "invalid choice: 'lamb'" in capsys.readouterr().err


def test_user_error_type():
    with pytest.raises(UserError):
        edited("--set", "seed=1.5")


# --- a field that is both a flag and a --set key: --set reaches the run, the flag wins over it ---------------


@pytest.mark.parametrize(
    "argv, seed",
    [
        (["--set", "seed=5"], 5),
        (["--seed", "7", "--set", "seed=5"], 7),  # the flag wins, as --help says
        (["--set", "seed=5", "--seed", "0"], 0),  # ...even when it names the recipe's own default
        ([], RECIPE.seed),
    ],
)
def test_set_seed_is_the_runs_seed_unless_the_flag_is_given(argv, seed):
    recipe, cfg = edited("--trials", "tf:none", *argv)
    assert cfg.seed == seed


@pytest.mark.parametrize(
    "argv, precision",
    [
        (["--set", "precision=bf16"], "bf16"),
        (["--precision", "fp32", "--set", "precision=bf16"], "fp32"),
        ([], RECIPE.precision),
    ],
)
def test_set_precision_is_the_runs_precision_unless_the_flag_is_given(argv, precision):
    _, cfg = edited("--trials", "tf:none", *argv)
    assert cfg.precision == precision


def test_set_epochs_and_steps_hold_under_quick_as_their_flags_do():
    """--quick's 1 epoch and one pass are defaults: an explicit --set, like an explicit flag, overrides them."""
    _, cfg = edited("--trials", "tf:none", "--quick", "--set", "epochs=3", "--set", "steps_per_epoch=4")
    assert (cfg.epochs, cfg.steps_per_epoch) == (3, 4)
    _, cfg = edited(
        "--trials",
        "tf:none",
        "--set",
        "epochs=3",
        "--epochs",
        "2",
        "--set",
        "steps_per_epoch=4",
        "--steps-per-epoch",
        "0",
    )
    assert (cfg.epochs, cfg.steps_per_epoch) == (2, None)  # the flags win; 0 = one pass


def test_set_batch_and_lr_reach_the_recipe_and_their_flags_win():
    recipe, _ = edited("--trials", "tf:none", "--set", "batch_per_replica=48", "--set", "optimizer.lr=0.02")
    assert (recipe.batch_per_replica, recipe.optimizer.lr) == (48, 0.02)
    recipe, _ = edited(
        "--trials",
        "tf:none",
        "--set",
        "batch_per_replica=48",
        "--batch",
        "16",
        "--set",
        "optimizer.lr=0.02",
        "--lr",
        "0.1",
    )
    assert (recipe.batch_per_replica, recipe.optimizer.lr) == (16, 0.1)


def test_every_flag_that_is_also_a_set_key_defaults_to_none():
    """A flag whose default came from the unedited recipe would silently undo a --set of the same field."""
    from raylab.cli.overrides import SETTABLE

    defaults = vars(cli.recipe_parser(RECIPE).parse_args([]))
    shared = [f for f in SETTABLE if f in defaults]
    assert sorted(shared) == ["epochs", "precision", "seed", "steps_per_epoch"]
    assert all(defaults[f] is None for f in shared)


def test_set_precision_takes_only_known_precisions():
    with pytest.raises(UserError, match="--set precision=fp8: use one of fp32, bf16, fp16"):
        edited("--set", "precision=fp8")
