"""The XLA backend's wiring, without starting workers: PJRT device choice, worker env, sync path."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from raylab.errors import UserError
from raylab.frameworks.xla import kinds as xla


def test_pjrt_device_follows_the_device_flag_unless_the_user_set_it(monkeypatch):
    """--device picks CPU/CUDA; an explicit PJRT_DEVICE wins."""
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    assert (xla.pjrt_device("cpu"), xla.pjrt_device("gpu")) == ("CPU", "CUDA")
    monkeypatch.setenv("PJRT_DEVICE", "TPU")
    assert xla.pjrt_device("cpu") == "TPU"


def test_worker_env_pins_one_cpu_device_and_eigen_threads():
    """On CPU each worker gets one XLA device, its threads as PJRT's pool size and single-threaded Eigen at 1
    thread; TPU gets only PJRT_DEVICE."""
    assert xla.worker_env("CPU", 1) == {
        "PJRT_DEVICE": "CPU",
        "CPU_NUM_DEVICES": "1",
        "PJRT_NPROC": "1",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
    }
    assert xla.worker_env("CPU", 2)["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=true"
    assert xla.worker_env("TPU", 1) == {"PJRT_DEVICE": "TPU"}


def test_jax_and_xla_set_xla_cpu_threads_alike():
    """One setting of XLA's CPU client threads (raylab/frameworks/cpu_threads.py) for both XLA frameworks."""
    from raylab.frameworks import cpu_threads
    from raylab.frameworks.jax.kinds import thread_env

    for threads in (1, 2, 4):
        ours = cpu_threads.env(threads)
        assert ours["PJRT_NPROC"] == str(threads)
        assert {k: xla.worker_env("CPU", threads)[k] for k in ours} == ours
        assert {k: thread_env(threads)[k] for k in ours} == ours


def test_sync_path_is_gloo_on_cpu_and_xla_collectives_elsewhere():
    """CPU processes are separate XLA worlds, so gradients go through gloo; TPU/GPU use XLA collectives."""
    assert xla.sync_path("CPU", 1) == "none"
    assert xla.sync_path("CPU", 2) == "gloo-cpu"
    assert xla.sync_path("TPU", 4) == "xla-collectives" and xla.sync_path("CUDA", 2) == "xla-collectives"


def test_preflight_refuses_devices_the_cluster_lacks():
    """TPU without TPUs and unknown PJRT devices are UserErrors."""
    with pytest.raises(UserError, match="no TPU resource"):
        xla.preflight("TPU", {"CPU": 2})
    with pytest.raises(UserError, match="not supported"):
        xla.preflight("METAL", {"CPU": 2})
    xla.preflight("TPU", {"CPU": 2, "TPU": 4})  # a simulated TPU host passes


@pytest.mark.skipif(xla._has_plugin("cuda"), reason="a PyTorch/XLA CUDA plugin is installed here")
def test_xla_on_gpu_is_refused_because_torch_xla_has_no_cuda_plugin():
    """torch-xla 2.9 itself cannot open a CUDA device; raylab says so before any worker starts."""
    probe = subprocess.run(
        [sys.executable, "-c", "import torch_xla; torch_xla.device()"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PJRT_DEVICE": "CUDA"},
    )
    assert probe.returncode != 0 and "No PjRtPlugin registered for: CUDA" in probe.stderr
    with pytest.raises(UserError, match="need PyTorch/XLA's CUDA plugin, which torch-xla 2.9 does not have"):
        xla.preflight("CUDA", {"CPU": 16, "GPU": 1})


XLA_BATCHES = """
import os, itertools, types
os.environ.update(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="1")
import numpy as np, torch, torch_xla
from raylab.frameworks.torch.worker import shuffled_batches
from raylab.frameworks.xla.worker import device_batches

data = types.SimpleNamespace(streamed=False, x=np.arange(50 * 3, dtype=np.float32).reshape(50, 3),
                             y=np.arange(50, dtype=np.int64))
cfg = types.SimpleNamespace(batch_per_replica=8, seed=5)
source = device_batches(data, cfg, 1, torch_xla.device(), 6)
whole = [source.next()[1].cpu().tolist() for _ in range(15)]  # 6 batches a pass: 2.5 passes
source.restart(8)
later = [source.next()[1].cpu().tolist() for _ in range(5)]
assert later == whole[8:13], (later, whole)
torch_order = [b.tolist() for b in itertools.islice(shuffled_batches(50, 8, torch.Generator().manual_seed(6)), 15)]
assert whole == torch_order, (whole, torch_order)  # the torch trials' order (seed + rank)
print("ok", flush=True)
# The loader's threads still prefetch from the endless order: at interpreter exit torch_xla can abort on them
# ("terminate called without an active exception"), as a Ray worker never meets (it leaves with os._exit).
os._exit(0)
"""


def test_xla_in_memory_batches_go_on_after_a_restart_in_the_torch_trials_order():
    """xla:* in memory: the torch trials' shuffled batches through MpDeviceLoader; restart(done) goes on from
    the trial's done-th batch (a checkpoint's position), as an uninterrupted run would."""
    run = subprocess.run([sys.executable, "-c", XLA_BATCHES], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
