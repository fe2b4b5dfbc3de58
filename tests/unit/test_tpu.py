"""TPU logic that runs without a TPU: flags, what a TPU worker asks Ray for, Ray's own ScalingConfig checks."""

from __future__ import annotations

import pytest
from ray.train import ScalingConfig

from raylab.config import Settings
from raylab.errors import UserError
from raylab.registry import get_strategy
from raylab.tpu import accelerator_type, describe, missing_tpu, parse_topology, parse_tpu_type, slice_scaling

CPU_ONLY = {"CPU": 2.0, "memory": 1e9, "object_store_memory": 1e8, "node:127.0.0.1": 1.0}
TPU_HOST = {**CPU_ONLY, "TPU": 4.0, "TPU-v4-8-head": 1.0, "accelerator_type:TPU-V4": 1.0}


def config(**kw) -> Settings:
    return Settings(
        trials=[], epochs=1, threads=1, seed=0, quick=True, tracking_uri="sqlite:///x.db", experiment="x", **kw
    )


def test_tpu_type_and_topology_flags():
    assert parse_tpu_type("v4-8") == "v4-8" and parse_tpu_type("v5litepod-16") == "v5litepod-16"
    assert parse_topology("2x2x1") == "2x2x1" and parse_tpu_type(None) is None
    with pytest.raises(UserError, match="--tpu-type 'TPU-v4' is not a TPU accelerator type"):
        parse_tpu_type("TPU-v4")
    with pytest.raises(UserError, match="--tpu-topology '2-2' is not a TPU topology"):
        parse_topology("2-2")
    assert accelerator_type("v4-8") == "TPU-V4" and accelerator_type("v5litepod-16") == "TPU-V5LITEPOD"


def test_missing_tpu_names_what_the_cluster_has():
    assert missing_tpu(None, CPU_ONLY) == "no TPU in the Ray cluster (it has CPU=2)"
    assert missing_tpu(None, TPU_HOST) is None and missing_tpu("v4-8", TPU_HOST) is None
    assert "no TPU-v4-16-head resource" in missing_tpu("v4-16", TPU_HOST)
    assert describe({"CPU": 8.0, "GPU": 1.0, "memory": 5.0}) == "CPU=8, GPU=1"


def test_tf_tpu_preflight_errors_by_default_and_falls_back_only_when_asked(capsys):
    tpu = get_strategy("tf:tpu")
    with pytest.raises(
        UserError,
        match=r"tf:tpu: no TPU in the Ray cluster .*run on a TPU node or choose another "
        r"strategy .*--tpu-fallback mirrored",
    ):
        tpu.preflight(config(), CPU_ONLY)
    tpu.preflight(config(tpu_fallback="mirrored"), CPU_ONLY)
    assert "actual_strategy=mirrored" in capsys.readouterr().out
    tpu.preflight(config(), TPU_HOST)  # a TPU host: no error, no note
    assert tpu.resources(config(), CPU_ONLY) == {}  # fallback on a CPU cluster asks Ray for no TPU


def test_one_tpu_worker_needs_no_slice_but_several_do():
    assert slice_scaling(None, None, 1) == {"use_tpu": True}
    with pytest.raises(UserError, match="4 TPU workers need the slice they run on: pass --tpu-type"):
        slice_scaling("v4-8", None, 4)
    args = slice_scaling("v4-8", "2x2x1", 4)
    assert args == {"use_tpu": True, "topology": "2x2x1", "accelerator_type": "TPU-V4"}
    # Ray's own validation accepts what raylab builds: 4 one-chip processes on a v4-8 (4 chips).
    ScalingConfig(num_workers=4, resources_per_worker={"CPU": 1, "TPU": 1}, **args)
    with pytest.raises(ValueError):  # and it is what would reject the slice arguments missing
        ScalingConfig(num_workers=4, resources_per_worker={"CPU": 1, "TPU": 1}, use_tpu=True)


def test_xla_workers_take_one_chip_each_on_tpu(monkeypatch):
    xla = get_strategy("xla:ddp")
    assert xla.resources(config(), TPU_HOST) == {}
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    assert xla.resources(config(), TPU_HOST) == {"TPU": 1}
