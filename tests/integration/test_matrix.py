"""The fashion matrix, once: every sync trial kind, PyTorch/XLA and a parameter-server kind train the
Fashion-MNIST subset on a real local Ray cluster in one invocation, with --profile and a Native metric,
and each test below reads what it checks from that run.

    tf:none, tf:mirrored x2, tf:mwms x2, torch:none, torch:ddp x2, xla:single, xla:ddp x2, torch:ps-async x2
    (two servers: --ps 2), jax:none, jax:dp x2

Together with tests/unit this is the fast tier (docs/testing.md): one trial of every framework and kind of
distribution, in under 5 minutes. The distributed strategies run on 2 workers only: x1 is the same code with one replica
(tf:mirrored x1 runs in test_tpu.py's fallback and test_recipes' mnist test, torch:ddp x1 in e2e).
"""

from __future__ import annotations

import math
import re

import pytest

from tests.integration.conftest import load_recipe, shared_run

pytestmark = pytest.mark.integration
RAY_TRAIN_STARTS = 0  # every trial here is the shared run's
SECONDS = 320  # measured 256 s (2026-12-06, the 2-core VM)

FASHION = load_recipe("fashion")
KINDS = [
    "tf:none x1",
    "tf:mirrored x2",
    "tf:mwms x2",
    "torch:none x1",
    "torch:ddp x2",
    "xla:single x1",
    "xla:ddp x2",
    "torch:ps-async x2",
    "jax:none x1",
    "jax:dp x2",
]
EXPECTED_CLASS = {
    "tf:none": "_DefaultDistributionStrategy",
    "tf:mirrored": "MirroredStrategy",
    "tf:mwms": "CollectiveAllReduceStrategy",  # the class behind tf.distribute.MultiWorkerMirroredStrategy
    "torch:none": "none",
    "torch:ddp": "DistributedDataParallel",
    "jax:none": "jit",
    "jax:dp": "jit+NamedSharding(batch)",
}
TRACES = {"tf": "profile/tf", "torch": "profile/torch_trace.json.gz", "xla": "profile/xla", "jax": "profile/jax"}


def sum_and_count_torch(y, p):
    import torch

    hits = (p.argmax(1) == y).sum(dtype=torch.float32)
    return hits, float(y.shape[0])  # a tensor numerator, a Python-number denominator


def sum_and_count_jax(y, p):
    hits = (p.argmax(1) == y).sum()
    return hits, y.shape[0]  # a traced numerator, a Python-number denominator (the batch's static size)


def sum_and_count_tf(y, p):
    import tensorflow as tf

    # Inside the trial's tf.function the batch dimension is not static (p.shape[0] is None): the count is a
    # tensor, an int32 one (cast by raylab); a Python number there would be fixed when the step is traced.
    hits = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(p, 1, output_type=tf.int32), tf.cast(y, tf.int32)), tf.float32))
    return hits, tf.shape(p)[0]


@pytest.fixture(scope="module")
def matrix(ray_cluster, tmp_path_factory, template_db):
    from raylab import Native

    recipe = FASHION.variant(
        metrics=("accuracy", Native(tf=sum_and_count_tf, torch=sum_and_count_torch, jax=sum_and_count_jax, name="hits"))
    )
    trials = (
        "tf:none,tf:mirrored x2,tf:mwms x2,torch:none,torch:ddp x2,xla:single,xla:ddp x2,torch:ps-async x2,"
        "jax:none,jax:dp x2"
    )
    return shared_run(
        tmp_path_factory.mktemp("matrix"),
        template_db,
        "fashion-matrix",
        10,
        recipe,
        "--quick",
        "--profile",
        "--ps",
        "2",
        "--trials",
        trials,
        seconds=340,  # 256 s on 2026-12-06 (the 2-core VM, the default tier alone)
    )


def most_reads(steps: int, window: int) -> int:
    """Host reads an epoch may make: one per window, plus the first step's and the warm-up's own windows."""
    return math.ceil(steps / window) + 2


def artifacts(client, run_id, path=""):
    out = []
    for a in client.list_artifacts(run_id, path):
        out += artifacts(client, run_id, a.path) if a.is_dir else [a.path]
    return out


def test_the_matrix_ran_every_kind_once_under_one_parent(matrix):
    assert matrix.code == 0, matrix.tail()
    assert [t["trial"] for t in matrix.summary["trials"]] == KINDS
    client, parent = matrix.client, matrix.summary["parent_run_id"]
    children = client.search_runs(
        [client.get_run(parent).info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'"
    )
    assert len(children) == len(KINDS)  # one child per trial, never one per rank
    assert client.get_run(parent).info.status == "FINISHED"


@pytest.mark.parametrize(
    "name", ["tf:none x1", "tf:mirrored x2", "tf:mwms x2", "torch:none x1", "torch:ddp x2", "jax:none x1", "jax:dp x2"]
)
def test_trial_kind_trains_and_is_recorded(matrix, name):
    """Each trial learns (loss below chance, accuracy well above it), MLflow records what ran, and the loop
    reads back to the host once per window. (Every step, with --step-latency: test_recipes' cifar10 run.)"""
    kind = name.split()[0]
    trial = matrix.trials()[name]
    assert trial["status"] == "FINISHED"
    assert trial["val_accuracy"] > 0.6
    assert trial["samples_per_sec"] > 0 and trial["step_time_p90_ms"] >= trial["step_time_p50_ms"] > 0
    assert 0 < trial["startup_s"] < trial["wall_s"]
    run = matrix.client.get_run(trial["run_id"])
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    assert tags["strategy_class"] == EXPECTED_CLASS[kind]
    assert int(tags["replicas_in_sync"]) == trial["workers"]
    assert int(tags["parameters"]) == 101_770
    assert int(tags["intra_op_threads"]) == (trial["workers"] if kind == "tf:mirrored" else 1)
    assert tags["device_kind"] == "cpu"
    # Every replica ended with the same weights (tf:mirrored: its two in-process copies); one replica: n/a.
    assert tags["replicas_consistent"] == ("True" if trial["workers"] > 1 else "n/a")
    assert len(tags["param_checksums"].split(",")) == trial["workers"]
    # Each worker process's peak RSS (tf:mirrored: one process holds every replica); the largest as a metric.
    peaks = [float(v) for v in tags["peak_rss_mb_by_rank"].split(",")]
    assert len(peaks) == (1 if kind == "tf:mirrored" else trial["workers"])
    assert 200 < metrics["peak_rss_mb"] < 24_000 and abs(metrics["peak_rss_mb"] - max(peaks)) <= 0.5  # tag: whole MB
    assert trial["peak_rss_mb"] == metrics["peak_rss_mb"]
    assert tags["built_optimizer"] == "adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)"
    assert tags["built_preprocess"].startswith("x*0.00392157+0") and "[0, 1]" in tags["built_preprocess"]
    assert int(params["global_batch"]) == 32 * trial["workers"]
    assert params["threads"] == "1" and params["framework"] == kind.split(":")[0]
    assert metrics["train_loss"] < math.log(10)  # below the loss of a uniform guess
    history = matrix.client.get_metric_history(trial["run_id"], "val_accuracy")
    assert [m.step for m in history] == [1]  # per-epoch metrics carry the epoch as step
    steps = int(metrics["steps_per_epoch"])
    assert steps == 8192 // (32 * trial["workers"])
    assert params["window"] == "32" and tags["step_timing"] == "window mean (32 steps per host read)"
    assert 0 < metrics["host_syncs"] <= most_reads(steps, 32)
    assert metrics["steps_per_host_sync"] == pytest.approx(steps / metrics["host_syncs"])
    if kind.startswith("tf:"):
        assert tags["steps_per_call"] == params["window"]  # the window's steps run as one tf.function call
        # No GPU may reach a CPU trial: hidden from each worker process from its start (/proc/self/environ).
        started = tags["worker_start_env"].split(" | ")
        assert all("CUDA_VISIBLE_DEVICES=" in env.split(",") for env in started)  # set, and empty


@pytest.mark.parametrize("name,workers,path", [("xla:single x1", 1, "none"), ("xla:ddp x2", 2, "gloo-cpu")])
def test_xla_trial_learns_agrees_and_does_not_recompile(matrix, name, workers, path):
    """Loss falls below chance, replicas end identical, no compilation after warm-up, all in MLflow."""
    trial = matrix.trials()[name]
    assert trial["status"] == "FINISHED" and trial["val_accuracy"] > 0.6
    run = matrix.client.get_run(trial["run_id"])
    tags, metrics = run.data.tags, run.data.metrics
    assert metrics["train_loss"] < math.log(10)
    assert tags["sync_path"] == path and tags["pjrt_device"] == "CPU" and tags["device_kind"] == "xla:cpu"
    # PJRT's device was in each worker's environment from its start, before the prewarm thread imported torch_xla.
    assert all("PJRT_DEVICE=CPU" in env.split(",") for env in tags["worker_start_env"].split(" | "))
    assert tags["replicas_consistent"] == ("True" if workers > 1 else "n/a")
    assert len(tags["param_checksums"].split(",")) == workers
    assert len(tags["peak_rss_mb_by_rank"].split(",")) == workers and metrics["peak_rss_mb"] > 200
    assert tags["optimizer_capturable"] == "True"  # Adam's step on the device: no late recompiles
    assert tags["precision_applied"] == "fp32" and int(tags["replicas_in_sync"]) == workers
    assert metrics["compile_count_warmup"] >= 1 and metrics["compile_time_warmup_s"] > 0
    assert metrics["compiles_after_warmup"] == 0 and "recompiled_after_warmup" not in tags
    # torch_xla's own transfer counter: one read per window (+ the first step's and the warm-up's), except
    # where gloo-cpu copies the gradients off the device every step to all-reduce them.
    steps = int(metrics["steps_per_epoch"])
    if path == "gloo-cpu":
        assert metrics["host_syncs"] >= steps
    else:
        assert 0 < metrics["host_syncs"] <= math.ceil(steps / 32) + 2


@pytest.mark.parametrize("name,workers", [("jax:none x1", 1), ("jax:dp x2", 2)])
def test_jax_trial_runs_one_jitted_step_on_the_threads_it_was_given(matrix, name, workers):
    """XLA's CPU threads set from the worker's start (PJRT_NPROC), no compilation after warm-up, a real
    two-process all-reduce (gloo) under jax:dp, the first steps' losses and the library versions recorded."""
    trial = matrix.trials()[name]
    run = matrix.client.get_run(trial["run_id"])
    tags, metrics = run.data.tags, run.data.metrics
    assert all("PJRT_NPROC=1" in env.split(",") for env in tags["worker_start_env"].split(" | "))
    assert tags["pjrt_nproc"] == "1" and tags["xla_preallocate"] == "false"
    assert tags["comm_backend"] == ("gloo" if workers > 1 else "none") and tags["float32_matmul"] == "ieee"
    assert metrics["compile_count_warmup"] >= 1 and metrics["compile_time_warmup_s"] > 0
    assert metrics["compiles_after_warmup"] == 0 and metrics["compile_count_eval"] >= 1
    losses = [float(v) for v in tags["first_losses"].split(",")]
    assert len(losses) == 4 and all(0 < v < 5 for v in losses)
    assert tags["framework_version"] == "0.10.2" and tags["flax_version"] == "0.12.8"
    text = open(matrix.client.download_artifacts(trial["run_id"], "profile/profile_summary.txt")).read()
    if workers > 1:  # the all-reduce is an XLA op of the step, and the summary counts it as communication
        comm = re.search(r"communication \(all-reduce, broadcast, collectives\): ([0-9.]+) s", text)
        assert comm and float(comm.group(1)) > 0, text[:1500]


def test_profile_logs_each_frameworks_trace_and_a_summary(matrix):
    """--profile: each trial's run holds its framework's trace and a profile_summary.txt, and is tagged profiled;
    a kind the profiler does not cover (the parameter-server ones, raylab/loop/profile.py) says so in that tag."""
    for trial in matrix.summary["trials"]:
        name, run_id = trial["trial"], trial["run_id"]
        tags = matrix.client.get_run(run_id).data.tags
        if ":ps" in name:
            assert tags["profiled"].startswith("no: ") and "no profiler hook" in tags["profiled"], tags["profiled"]
            continue
        files = artifacts(matrix.client, run_id)
        assert any(f.startswith(TRACES[name.split(":")[0]]) for f in files), (name, files)
        text = open(matrix.client.download_artifacts(run_id, "profile/profile_summary.txt")).read()
        assert text.startswith(f"raylab profile: {name}, rank 0, steps "), text[:200]
        assert "top " in text and "operations by self time" in text
        assert tags["profiled"].startswith("steps ") and "of rank 0" in tags["profiled"], tags["profiled"]
        assert f"[{name}] profiled steps" in matrix.out
    xla = matrix.trials()["xla:single x1"]["run_id"]
    assert "profile/xla_metrics.txt" in artifacts(matrix.client, xla)
    ddp = matrix.trials()["torch:ddp x2"]["run_id"]
    ddp_text = open(matrix.client.download_artifacts(ddp, "profile/profile_summary.txt")).read()
    assert "communication (all-reduce, broadcast, collectives):" in ddp_text


def test_a_native_metric_with_a_python_number_denominator_trains_everywhere(matrix):
    """A Native metric returning (tensor, Python number) in torch and xla, (tensor, int32 tensor) in TF: it
    equals accuracy in every trial kind."""
    for trial in matrix.summary["trials"]:
        m = matrix.client.get_run(trial["run_id"]).data.metrics
        assert m["val_hits"] == pytest.approx(m["val_accuracy"], abs=1e-6), (trial["trial"], m)


def test_torch_ps_async_with_two_servers_records_staleness(matrix):
    trial = matrix.trials()["torch:ps-async x2"]
    run = matrix.client.get_run(trial["run_id"])
    assert trial["val_accuracy"] > 0.6 and run.data.tags["parameter_servers"] == "2"
    m = run.data.metrics
    assert m["staleness_max"] >= 1 and 0 < m["staleness_mean"] <= m["staleness_max"]
    assert run.data.tags["replicas_consistent"] == "n/a"  # asynchronous workers hold different versions by design
    table = matrix.out.split("experiment 'fashion', run")[-1]
    assert "stale mean" in table and "torch:ps-async x2 *" in table and "oversubscribed" in table


def test_work_per_sample_is_each_frameworks_own_count_and_the_table_shows_the_rate(matrix):
    """tf:none, torch:none and jax:none count one training step of the fashion MLP with their own counters (TF's
    profiler, torch's FlopCounterMode, XLA's cost analysis): about 0.41 MFLOP a sample (2 FLOPs a weight forward, 2
    for its gradient, 2 for the input gradients of every layer but the first), within 2% of each other; the rate
    is that count times samples/s, and the table shows it."""
    counts = {}
    for name in ("tf:none x1", "torch:none x1", "jax:none x1"):
        trial = matrix.trials()[name]
        counts[name] = trial["flops_per_sample"]
        assert trial["achieved_tflops"] == pytest.approx(counts[name] * trial["samples_per_sec"] / 1e12, rel=0.02)
    assert all(400_000 < c < 420_000 for c in counts.values()), counts
    assert max(counts.values()) <= 1.02 * min(counts.values()), counts
    assert "GFLOP/s" in matrix.out.split("experiment 'fashion', run")[-1]


def test_the_parity_report_calls_unlike_executions_unfair_and_says_how_to_align_them(matrix):
    """The matrix runs each framework's usual execution (`--compile off`): tf.function, eager, torch_xla's graphs and
    jit side by side, which the report calls UNFAIR, naming the executions and the flag that aligns them. (Its other
    verdict, fair, at each framework's best: tests/e2e/test_walkthrough.py.)"""
    out = matrix.out.split("experiment 'fashion', run")[-1]
    verdict = re.search(r"^parity: UNFAIR \((.*)\)$", out, re.M)
    assert verdict and "execution" in verdict.group(1), out[-3000:]
    assert re.search(r"^  ! execution .*tf\.function: .*eager: .*xla: .*jit: .*--compile on", out, re.M), out[-3000:]
    # and so the answer by samples/s ranks nothing: what the verdict does not support is not ranked
    assert re.search(r"^the answer, by samples/s .*\n  none ranked: the trials differ in .*execution", out, re.M), out[
        -3000:
    ]


def test_finished_trials_leave_no_checkpoints_and_the_end_says_so(matrix):
    """--keep-checkpoints none (the default): every trial checkpointed (its size recorded), and once it FINISHED its
    Ray Train run's directory went, a warm group's at the invocation's end (raylab/driver/retention.py)."""
    import os
    from pathlib import Path

    storage = Path(os.path.expanduser("~/ray_results"))
    for t in matrix.summary["trials"]:
        run = matrix.client.get_run(t["run_id"])
        assert run.data.params["keep_checkpoints"] == "none"
        assert run.data.metrics["checkpoint_mb"] > 0.1, (t["trial"], run.data.metrics.get("checkpoint_mb"))
        for name in (f"raylab-{t['run_id']}", run.data.tags.get("train_run")):
            assert not name or not (storage / name).exists(), (t["trial"], name)
    assert "raylab: checkpoints: none kept (" in matrix.out
