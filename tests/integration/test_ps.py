"""Parameter-server trials on a real local Ray cluster: they train, sync PS equals DDP, async measures staleness,
and a dead server or chief fails the trial cleanly, leaving nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")


def runs_of(client, summary):
    return {t["trial"]: client.get_run(t["run_id"]) for t in summary["trials"]}


def test_torch_ps_sync_computes_what_ddp_computes(run_recipe):
    """Same seed, same shards, same order: averaged gradients applied once equal DDP's all-reduce."""
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:ddp,torch:ps-sync", "--workers", "2")
    assert code == 0
    runs = runs_of(client, summary)
    ddp, ps = runs["torch:ddp x2"], runs["torch:ps-sync x2"]
    ddp_sum = [float(v) for v in ddp.data.tags["param_checksums"].split(",")]
    ps_sum = [float(v) for v in ps.data.tags["param_checksums"].split(",")]
    assert len(ps_sum) == 2 and ps.data.tags["replicas_consistent"] == "True"
    assert ps_sum[0] == pytest.approx(ddp_sum[0], rel=1e-5)
    assert ps.data.metrics["val_accuracy"] == pytest.approx(ddp.data.metrics["val_accuracy"], abs=2e-3)
    assert ps.data.metrics["val_accuracy"] > 0.6
    assert ps.data.params["parameter_servers"] == "1" and ps.data.params["ray_workers"] == "3"
    # 3 processes on 2 CPUs: it ran, on a share of the CPUs, and says so.
    assert ps.data.params["oversubscribed"] == "True" and float(ps.data.params["cpus_per_process"]) < 1
    assert ddp.data.params["oversubscribed"] == "False"
    m = ps.data.metrics
    assert m["ps_push_pull_ms"] > 0 and m["ps_bytes_per_step"] == 2 * 101_770 * 4 * 2


def test_torch_ps_async_with_two_servers_records_staleness(run_recipe, capsys):
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "torch:ps-async", "--workers", "2",
                                       "--ps", "2")
    assert code == 0
    (trial,) = summary["trials"]
    run = client.get_run(trial["run_id"])
    assert trial["val_accuracy"] > 0.6 and run.data.tags["parameter_servers"] == "2"
    m = run.data.metrics
    assert m["staleness_max"] >= 1 and 0 < m["staleness_mean"] <= m["staleness_max"]
    assert run.data.tags["replicas_consistent"] == "n/a"  # asynchronous workers hold different versions by design
    table = capsys.readouterr().out.split("experiment 'fashion', run")[-1]
    assert "stale mean" in table and "torch:ps-async x2 *" in table and "oversubscribed" in table


def test_tf_ps_trains_with_chief_ps_and_workers(run_recipe):
    code, summary, client = run_recipe(FASHION, "--quick", "--trials", "tf:ps", "--workers", "2")
    assert code == 0
    (trial,) = summary["trials"]
    run = client.get_run(trial["run_id"])
    assert trial["status"] == "FINISHED" and trial["val_accuracy"] > 0.6
    assert run.data.tags["strategy_class"] == "ParameterServerStrategyV2"  # tf.distribute.ParameterServerStrategy
    assert run.data.params["ray_workers"] == "4" and run.data.params["oversubscribed"] == "True"
    m = run.data.metrics
    assert m["ps_bytes_per_step"] > 0 and 0 <= m["staleness_mean"] <= m["staleness_max"]
    assert run.data.tags["replicas_consistent"] == "n/a"  # one copy of the weights, on the ps


def leftovers() -> list[str]:
    """raylab's Ray processes still alive: trial workers, parameter servers, sinks."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout
    return [line for line in out.splitlines()
            if line.startswith(("ray::RayTrainWorker", "ray::ParameterServer", "ray::TrialSink"))]


def kill_when_training(ray, victim, timeout=300):
    """In the background: once a trial's sink shows training progress, kill what `victim(sink)` picks."""
    outcome = {}

    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            names = [n for n in ray.util.list_named_actors() if n.startswith("raylab-sink-")]
            if names:
                sink = ray.get_actor(names[0])
                latest, _, _ = ray.get(sink.poll.remote(), timeout=30)
                if latest is not None:
                    outcome["killed"] = victim(ray, sink)
                    return
            time.sleep(0.5)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, outcome


def assert_nothing_left():
    deadline = time.monotonic() + 60
    while leftovers() and time.monotonic() < deadline:
        time.sleep(1)
    assert leftovers() == []


def kill_server(ray, sink):
    (name,) = [n for n in ray.get(sink.registered.remote(), timeout=30) if n.endswith("/ps0")]
    handle, _ = ray.get(sink.lookup.remote([name]), timeout=30)[0]
    ray.kill(handle)
    return name


def kill_chief(ray, sink):
    (name,) = [n for n in ray.get(sink.registered.remote(), timeout=30) if n.startswith("chief-pid-")]
    os.kill(int(name.rsplit("-", 1)[1]), signal.SIGKILL)
    return name


@pytest.mark.parametrize("kind,victim,flags", [("torch:ps-sync", kill_server, ["--max-failures", "0"]),
                                               ("tf:ps", kill_chief, ["--max-failures", "0"])])
def test_killing_a_server_or_the_chief_fails_the_trial_and_leaves_nothing(run_recipe, ray_cluster, kind, victim,
                                                                          flags):
    """Without restarts (--max-failures 0): FAILED at once, with the reason."""
    thread, outcome = kill_when_training(ray_cluster, victim)
    code, summary, client = run_recipe(FASHION, "--quick", "--epochs", "5", "--trials", kind, "--workers", "2",
                                       *flags)
    thread.join(timeout=60)
    assert outcome.get("killed"), "the trial finished before anything was killed"
    assert code == 1
    (trial,) = summary["trials"]
    run = client.get_run(trial["run_id"])
    assert run.info.status == "FAILED" and trial["status"] == "FAILED"
    reason = run.data.tags["error_summary"]
    expected = "parameter server died mid-trial" if kind == "torch:ps-sync" else "The actor died unexpectedly"
    assert expected in reason, reason
    assert run.data.params["max_failures"] == "0" and run.data.metrics["restarts"] == 0
    assert run.data.tags["failures"].endswith("not restarted: the restart budget (--max-failures) is spent")
    assert_nothing_left()
