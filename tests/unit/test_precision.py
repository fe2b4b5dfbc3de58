"""--precision: what each trial kind applies, and what is refused before Ray starts."""

from __future__ import annotations

import pytest

from raylab.settings import precision, resolve
from raylab.errors import UserError
from tests.unit.test_config import _main_fails, config, no_ray  # noqa: F401 - a fixture


def test_bf16_is_applied_by_torch_and_tf_and_by_xla_on_a_tpu_only():
    for kind in ("torch:none", "torch:ddp", "tf:none", "tf:mirrored", "tf:mwms", "tf:tpu"):
        assert precision.why_not(kind, "bf16", "cpu") is None, kind
    assert precision.why_not("xla:single", "bf16", "tpu") is None
    assert "TPU only" in precision.why_not("xla:ddp", "bf16", "cpu")
    assert "parameter servers" in precision.why_not("torch:ps-sync", "bf16", "cpu")


def test_fp16_is_applied_by_torch_and_tf_with_loss_scaling_and_refused_elsewhere():
    for kind in ("torch:none", "torch:ddp", "tf:none", "tf:mirrored", "tf:mwms"):
        assert precision.why_not(kind, "fp16", "cpu") is None, kind
        assert precision.why_not(kind, "fp16", "gpu") is None, kind
    assert "no float16 arithmetic" in precision.why_not("tf:tpu", "fp16", "tpu")
    assert "no float16 path" in precision.why_not("xla:single", "fp16", "tpu")
    assert "no loss scaling" in precision.why_not("jax:dp", "fp16", "gpu")
    for kind in ("tf:ps", "torch:ps-sync", "torch:ps-async"):
        assert "parameter servers" in precision.why_not(kind, "fp16", "cpu"), kind
    assert all(precision.why_not(k, "fp32", "cpu") is None for k in ("tf:ps", "xla:single", "torch:ps-async"))


def test_what_cannot_be_applied_stops_unless_a_fallback_is_asked():
    with pytest.raises(
        UserError,
        match=r"--precision bf16: xla:single x1 cannot apply it \(torch_xla 2.9's autocast "
        r"runs bf16 on a TPU only\); drop it from --trials, or add "
        r"--precision-fallback fp32",
    ):
        resolve.check(config("--trials", "tf:none,torch:none,xla:single", "--precision", "bf16"))
    cfg = config("--trials", "tf:none,torch:none", "--precision", "bf16")
    resolve.check(cfg)
    assert [resolve.trial(cfg, s).precision for s in cfg.trials] == ["bf16", "bf16"]
    assert not any("runs fp32" in note for note in cfg.notes)
    cfg = config("--trials", "tf:none,xla:single", "--precision", "bf16", "--precision-fallback", "fp32")
    resolve.check(cfg)
    tf, xla = (resolve.trial(cfg, s) for s in cfg.trials)
    assert (tf.precision, tf.precision_fallback_reason) == ("bf16", None)
    assert xla.precision == "fp32" and "TPU only" in xla.precision_fallback_reason
    assert cfg.notes[-1:] == [
        f"xla:single x1 runs fp32, not bf16: {xla.precision_fallback_reason} (--precision-fallback fp32)"
    ]
    with pytest.raises(UserError, match="the plain scripts run fp32"):
        resolve.check(config("--trials", "torch:none", "--precision", "bf16", "--plain"))


def test_a_fallen_trial_keeps_its_fallback_under_a_new_batch():
    """--batch max gives a trial a new batch (and name " bN"): what it applies is resolved from its kind and device,
    not looked up by its name."""
    import dataclasses

    cfg = config("--trials", "xla:single", "--precision", "bf16", "--precision-fallback", "fp32")
    resolve.check(cfg)
    searched = dataclasses.replace(cfg.trials[0], batch=512)
    assert searched.name == "xla:single x1 b512"
    assert resolve.trial(cfg, searched).precision == "fp32" and resolve.trial(cfg, searched).precision_fallback_reason


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--precision", "fp16"], "xla:single x1 cannot apply it (xla:single has no fp16 step in raylab: torch_xla"),
        (["--trials", "jax:none", "--precision", "fp16"], "jax:none x1 cannot apply it"),
        (["--trials", "xla:single", "--precision", "bf16"], "xla:single x1 cannot apply it"),
        (["--trials", "torch:ps-sync", "--set", "precision=bf16"], "torch:ps-sync x1 cannot apply it"),
    ],
)
def test_refused_precision_exits_2_in_one_line_before_ray(no_ray, fashion_root, monkeypatch, capsys, argv, words):
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    line = _main_fails(capsys, ["--quick", *argv])
    assert words in line and "--precision-fallback fp32" in line


def test_a_trial_s_workers_are_told_what_it_resolved_to():
    """The driver reads a trial's settings from resolve.trial: a fallen trial's workers are told fp32, a --device
    sweep's trial its own device, every one the invocation's threads and its execution."""
    from raylab.driver.trainer import worker_config
    from tests.unit.test_config import RECIPE

    cfg = config(
        "--trials", "tf:none,xla:single", "--precision", "bf16", "--precision-fallback", "fp32", "--device", "cpu,gpu"
    )
    resolve.check(cfg)
    told = {s.name: worker_config(RECIPE, cfg, s, None, {}, None, 0.0) for s in cfg.trials}
    assert {name: (w.device, w.precision) for name, w in told.items()} == {
        "tf:none x1 on cpu": ("cpu", "bf16"),
        "xla:single x1 on cpu": ("cpu", "fp32"),
        "tf:none x1 on gpu": ("gpu", "bf16"),
        "xla:single x1 on gpu": ("gpu", "fp32"),
    }
    assert {w.threads for w in told.values()} == {cfg.threads}
    assert [w.execution for w in told.values()] == [resolve.trial(cfg, s).execution for s in cfg.trials]
