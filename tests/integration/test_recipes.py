"""Every seed recipe runs --quick through its real command line on a real local Ray cluster, and the protocol shows."""

from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest

from tests.integration.conftest import ROOT, load_recipe

pytestmark = pytest.mark.integration
# fashion_cnn 1, cifar10 1, the plain script's trial twice, resunet_train 4 (mnist in bf16: test_bf16.py; the
# step benchmarks run in Ray tasks, not Ray Train)
TIER = "full"
RAY_TRAIN_STARTS = 7  # the --repeats 2 trial's second repeat runs warm
SECONDS = 800


def load_bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BENCH


def children(client, summary):
    exp = client.get_run(summary["parent_run_id"]).info.experiment_id
    return client.search_runs(
        [exp],
        filter_string=f"tags.`mlflow.parentRunId` = '{summary['parent_run_id']}'",
        order_by=["attributes.start_time ASC"],
    )


def test_fashion_cnn_trains_through_raylab(run_recipe, capsys):
    """The 5-layer CNN trains a step through raylab (torch's model is checked against it in tests/unit)."""
    # --set seed reaches the trial (it was once accepted and then ignored)
    code, summary, client = run_recipe(load_recipe("fashion_cnn"), "--quick", "--trials", "tf:none", "--set", "seed=5")
    assert code == 0, capsys.readouterr().err[-2000:]
    for run in children(client, summary):
        assert run.info.status == "FINISHED"
        assert run.data.params["seed"] == "5" and run.data.tags["precision_applied"] == "fp32"
        assert run.data.tags["parameters"] == "1619084"
        assert run.data.params["global_batch"] == "1024" and run.data.params["target_accuracy"] == "0.88"
        assert run.data.metrics["steps_per_epoch"] == 2  # --quick: one pass over 2048 items
    out = capsys.readouterr().out
    assert "parity: fair" in out and "parameters: 1619084" in out


def test_cifar10_synthetic_makes_no_accuracy_claim(run_recipe, capsys):
    """Without CIFAR-10 files: synthetic data, recorded, and no accuracy or time to target in the comparison.
    --step-latency: the loop reads back to the host after every step, and says so."""
    code, summary, client = run_recipe(load_recipe("cifar10"), "--quick", "--trials", "torch:none", "--step-latency")
    assert code == 0
    for run in children(client, summary):
        assert run.data.params["data"] == "cifar-10-synthetic" and run.data.params["data_synthetic"] == "True"
        assert run.data.params["target_accuracy"] == "None" and run.data.tags["parameters"] == "1250858"
        steps = int(run.data.metrics["steps_per_epoch"])
        assert run.data.params["window"] == "1" and run.data.tags["step_timing"] == "per step (synced)"
        assert run.data.metrics["host_syncs"] == steps
    out = capsys.readouterr().out
    table = out[out.index("trial  ") : out.index("parity:")]
    row = table.splitlines()[2].split()
    assert row[0] == "torch:none" and row[3] == "eager"
    assert row[10:12] == ["-", "-"]  # test acc and test loss: not shown
    assert "data is synthetic: throughput only, no accuracy claims" in out
    assert "test_accuracy" not in out  # nor in the per-epoch progress lines


def test_plain_and_repeats_show_overhead_spread_and_startup(run_recipe, capsys):
    """--plain --repeats 2: trial and plain script interleaved (A B B A), folded to medians, overhead shown; with
    --pin-cpus, each on a CPU of its own (the second trial in its warm group's same process, pinned again)."""
    code, summary, client = run_recipe(
        load_recipe("fashion"), "--quick", "--trials", "torch:none", "--plain", "--repeats", "2", "--pin-cpus"
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    runs = children(client, summary)
    assert [(r.info.run_name, r.data.params["repeat"]) for r in runs] == [
        ("torch:none x1", "1"),
        ("torch:plain x1", "1"),
        ("torch:plain x1", "2"),
        ("torch:none x1", "2"),
    ]
    plain = [r for r in runs if r.info.run_name == "torch:plain x1"]
    assert all(r.info.status == "FINISHED" and r.data.tags["parameters"] == "101770" for r in plain)
    assert all(r.data.metrics["samples_per_sec"] > 0 and r.data.metrics["wall_s"] > 0 for r in plain)
    assert all(r.data.metrics["steady_steps"] > 0 and r.data.metrics["steady_s"] > 0 for r in plain)
    top = max(os.sched_getaffinity(0))  # the driver back on every CPU it had; the training processes took the last
    for r in runs:
        assert r.data.params["pin_cpus"] == "True"
        assert r.data.tags["cpu_pinning"].startswith(f"training processes on CPU {top}; the cluster's "), r.data.tags
    # the warm repeat's sink started before its steps, not beside them (it read 0.7-1.2 cores there, 0.2 after)
    warm = runs[-1].data.tags["beside"]
    assert float(re.search(r"Ray and this job (\d+\.\d+)", warm).group(1)) < 0.5, warm
    trial = next(r for r in runs if r.info.run_name == "torch:none x1")
    phases = [
        trial.data.metrics[f"startup_{p}_s"]
        for p in ("process", "workers", "imports", "setup", "data", "model", "other")
    ]
    assert abs(sum(phases) - trial.data.metrics["startup_s"]) < 0.05 * trial.data.metrics["startup_s"] + 0.01
    out = capsys.readouterr().out
    assert "torch:none x1 vs torch:plain x1: samples/s" in out and "targets wall <= 1.05x" in out
    assert "medians over repeats" in out and "parity: fair" in out
    assert "torch:none x1: " in out[out.index("startup before the first step") :]


def test_conv_bench_times_every_framework(ray_cluster, tmp_path, monkeypatch, capsys):
    """The convolution micro-benchmark: tf, torch, xla and jax each in a fresh worker, timed, XLA's and jax's
    compilations recorded."""
    from mlflow.tracking import MlflowClient

    from raylab.cli import bench_main

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    code = bench_main(load_bench("conv_bench"), ["--quick", "--tracking-uri", uri, "--json", str(tmp_path / "s.json")])
    assert code == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert [t["trial"] for t in summary["trials"]] == ["tf:none x1", "torch:none x1", "xla:single x1", "jax:none x1"]
    for t in summary["trials"]:
        assert t["status"] == "FINISHED" and t["step_time_p50_ms"] > 0 and t["samples_per_sec"] > 0
    xla = MlflowClient(tracking_uri=uri).get_run(summary["trials"][2]["run_id"])
    assert xla.data.metrics["compile_count_warmup"] >= 1 and xla.data.tags["pjrt_device"] == "CPU"
    assert xla.data.tags["device_kind"] == "xla:cpu"
    assert xla.data.params["data"] == "synthetic"
    jax = MlflowClient(tracking_uri=uri).get_run(summary["trials"][3]["run_id"])
    assert jax.data.metrics["compile_count_warmup"] >= 1 and jax.data.tags["device_kind"] == "cpu"


def test_step_benchmark_refuses_a_distributed_trial(ray_cluster, capsys):
    from raylab.cli import bench_main

    assert bench_main(load_bench("resunet"), ["--trials", "torch:ddp"]) == 2
    assert (
        "resunet is a single-process step benchmark; it runs tf:none, torch:none, xla:single, jax:none, not torch:ddp"
    ) in capsys.readouterr().err


def test_step_benchmark_on_gpu_needs_a_gpu_in_the_cluster(ray_cluster, tmp_path, capsys):
    """--device gpu asks Ray for a GPU per trial: on a cluster without one, exit 2 before any trial or run."""
    from mlflow.tracking import MlflowClient

    from raylab.cli import bench_main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert (
        bench_main(load_bench("conv_bench"), ["--trials", "torch:none", "--device", "gpu", "--tracking-uri", uri]) == 2
    )
    assert "torch:none x1 needs 1 GPUs but the Ray cluster has 0; use --device cpu" in capsys.readouterr().err
    exp = MlflowClient(tracking_uri=uri).get_experiment_by_name("conv_bench")
    assert exp is None or not MlflowClient(tracking_uri=uri).search_runs([exp.experiment_id])


def test_resunet_training_step_runs_in_torch_and_tf(ray_cluster, tmp_path, monkeypatch, capsys):
    """The 30M-parameter ResNet-UNet's training step runs --quick in TF, torch and JAX with the same parameter count."""
    from mlflow.tracking import MlflowClient

    from raylab.cli import bench_main

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    code = bench_main(
        load_bench("resunet"),
        [
            "--quick",
            "--trials",
            "tf:none,torch:none,jax:none",
            "--tracking-uri",
            uri,
            "--json",
            str(tmp_path / "s.json"),
        ],
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    trials = json.loads((tmp_path / "s.json").read_text())["trials"]
    client = MlflowClient(tracking_uri=uri)
    assert {client.get_run(t["run_id"]).data.tags["parameters"] for t in trials} == {"29539970"}


@pytest.mark.timeout(900)  # 6-7.5 min here with other jobs on the 2 cores; xla:single compiles for ~45 s
def test_resunet_trains_masks_and_depth_in_every_framework(run_recipe, capsys):
    """The 30M-parameter ResNet-UNet learns the procedural scenes' masks in TF, torch, XLA and JAX within --quick
    (20 steps of 2): foreground IoU far above all-foreground's (the foreground fraction, ~0.2) and
    all-background's (0). Measured here: tf 0.75, torch 0.90, xla 0.95, jax 0.76."""
    recipe = load_recipe("resunet_train")
    # Two threads a worker: one trial at a time has both cores, and the 30M-parameter step takes ~1 s an image
    # on one (as the recipe's docstring runs it).
    code, summary, client = run_recipe(
        recipe, "--quick", "--trials", "tf:none,torch:none,xla:single,jax:none", "--threads", "2"
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    foreground = float(recipe.data()[3]["mask"][: recipe.quick_test].mean())  # all-foreground's IoU on them
    runs = children(client, summary)
    assert [r.info.run_name for r in runs] == ["tf:none x1", "torch:none x1", "xla:single x1", "jax:none x1"]
    for run in runs:
        m = run.data.metrics
        assert run.info.status == "FINISHED" and run.data.tags["parameters"] == "29539970"
        assert m["steps_per_epoch"] == 20
        assert m["val_mask_iou"] > max(0.5, 2.5 * foreground), (run.info.run_name, m["val_mask_iou"], foreground)
        assert m["val_mask_dice"] > 0.65
        assert m["val_depth_mean_absolute_error"] < 0.6  # predicting 0 everywhere (the untrained head) scores ~0.86
    out = capsys.readouterr().out
    # tf's tf.function and torch's eager steps beside jax's jit and torch_xla's graphs: unlike, and said so
    assert "mask iou" in out and "parity: UNFAIR (execution differ)" in out, out
    # the four models' settings as each framework built them (BatchNorm epsilon 1e-3 and decay 0.9, the conv
    # kernels' initial spreads), read before the first step: alike (raylab/task/model_settings.py)
    assert re.search(
        r"^    model settings: alike \(1 normalization setting\(s\), 0 dropout rate\(s\), 105 initial parameter "
        r"spreads and \d+ activation call\(s\) compared\)$",
        out,
        re.M,
    ), out
    assert (
        "  ! execution (compiled against not): tf.function: tf:none x1; eager: torch:none x1; xla: xla:single x1; "
        "jit: jax:none x1; run them all compiled with --compile on" in out
    )
