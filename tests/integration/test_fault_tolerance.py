"""A trial survives a lost worker: real worker processes SIGKILLed mid-trial on the shared local cluster.

Each trial checkpoints at epoch ends; Ray Train restarts the worker group from the last checkpoint, the
data order goes on where it was, and MLflow holds every epoch once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.integration.conftest import load_recipe

pytestmark = pytest.mark.integration

FASHION = load_recipe("fashion")


class Killer(threading.Thread):
    """Kills one process in epoch 2 of each of the first `trials` trials it sees, once epoch 1 has reached the
    driver: pick(ray, sink) says which (a pid), or None to leave that trial alone; by default the newest
    process of the actor class given (a Ray Train worker, a parameter server)."""

    def __init__(self, ray, actor_class: str, trials: int, timeout: float = 600, pick=None):
        super().__init__(daemon=True)
        self.ray, self.actor_class, self.trials, self.timeout = ray, actor_class, trials, timeout
        self.pick = pick or (lambda ray, sink: max(actor_pids(self.actor_class)))
        self.killed: list[tuple[str, int | None]] = []  # (sink name, pid; None: left alone)
        self.stop = threading.Event()

    def run(self):
        deadline, seen = time.monotonic() + self.timeout, []
        while (len([k for k in self.killed if k[1]]) < self.trials and time.monotonic() < deadline
               and not self.stop.is_set()):
            sinks = sorted(n["name"] if isinstance(n, dict) else n for n in self.ray.util.list_named_actors()
                           if (n["name"] if isinstance(n, dict) else n).startswith("raylab-sink-"))
            for name in sinks:
                if name in seen:
                    continue
                try:
                    sink = self.ray.get_actor(name)
                    _, epochs, _ = self.ray.get(sink.poll.remote(), timeout=10)
                    if len(epochs) >= 1:
                        seen.append(name)
                        pid = self.pick(self.ray, sink)
                        if pid:
                            os.kill(pid, signal.SIGKILL)
                        self.killed.append((name, pid))
                except Exception:  # noqa: BLE001 - the trial ended meanwhile
                    seen.append(name)
            time.sleep(0.2)


def actor_pids(actor_class: str) -> list[int]:
    """Processes whose title Ray set to the actor's class (`ray::RayTrainWorker...`, `ray::ParameterServer...`)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            title = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and title.startswith(f"ray::{actor_class}"):
            pids.append(int(proc.name))
    return pids


def children(client, parent_id):
    exp = client.get_run(parent_id).info.experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}'")
    return sorted(runs, key=lambda r: r.info.start_time)


def no_train_workers_left():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not actor_pids("RayTrainWorker") and not actor_pids("ParameterServer"):
            return True
        time.sleep(1)
    return False


def run_killing(run_recipe, ray, actor_class: str, trials: int, *args, pick=None):
    """Runs the fashion recipe with `args` while a Killer kills one `actor_class` process (or the one `pick`
    names) in each of the first `trials` trials; (exit code, summary, MLflow client, killer)."""
    killer = Killer(ray, actor_class, trials=trials, pick=pick)
    killer.start()
    try:
        code, summary, client = run_recipe(FASHION, "--quick", *args)
    finally:
        killer.stop.set()
        killer.join(timeout=30)
    return code, summary, client, killer


def test_lost_worker_restarts_from_checkpoint_and_logs_each_epoch_once(run_recipe, ray_cluster):
    """torch:ddp x2 and tf:mwms x2, a worker SIGKILLed in epoch 2 of 4: FINISHED with restarts=1, epochs 1..4
    once each, and the same result as the uninterrupted repeat (torch: equal weights; TF: accuracy within 0.005)."""
    code, summary, client, killer = run_killing(run_recipe, ray_cluster, "RayTrainWorker", 2, "--trials",
                                                "torch:ddp x2,tf:mwms x2", "--epochs", "4", "--steps-per-epoch", "400",
                                                "--repeats", "2", "--checkpoint-every", "0")
    assert code == 0, summary
    assert len(killer.killed) == 2, killer.killed
    runs = {r.info.run_id: r for r in children(client, summary["parent_run_id"])}
    killed_runs = {name.removeprefix("raylab-sink-") for name, pid in killer.killed if pid}
    by_kind: dict[str, list] = {}
    for trial in summary["trials"]:
        run = runs[trial["run_id"]]
        assert run.info.status == "FINISHED"
        restarted = trial["run_id"] in killed_runs
        assert run.data.metrics.get("restarts", 0) == (1 if restarted else 0), trial
        if restarted:  # killed once epoch 1 reached the driver, so after epoch 1's checkpoint was safe
            assert run.data.tags["restarted"] == "1"
            assert run.data.metrics["recovery_s"] > 0 and run.data.metrics["lost_s"] >= 0
            assert run.data.metrics["resumed_from_step"] >= 400, run.data.metrics
        else:
            assert "resumed_from_step" not in run.data.metrics
        for key in ("val_accuracy", "epoch_time_s", "train_loss"):
            steps = [m.step for m in client.get_metric_history(trial["run_id"], key)]
            assert sorted(steps) == [1, 2, 3, 4], (trial["trial"], key, steps)
        assert run.data.tags["checkpointing"] == "epoch ends"
        assert run.data.metrics["checkpoints"] == 4
        by_kind.setdefault(trial["trial"], []).append((restarted, run))
    torch_runs = by_kind["torch:ddp x2"]
    assert sorted(r for r, _ in torch_runs) == [False, True]
    sums = {r.data.tags["param_checksums"] for _, r in torch_runs}
    assert len(sums) == 1, sums  # bit for bit the weights of the uninterrupted run
    tf_runs = by_kind["tf:mwms x2"]
    assert sorted(r for r, _ in tf_runs) == [False, True]
    accs = [r.data.metrics["val_accuracy"] for _, r in tf_runs]
    assert abs(accs[0] - accs[1]) <= 0.005, accs
    assert no_train_workers_left()



def test_lost_parameter_server_restarts_from_its_checkpointed_shard(run_recipe, ray_cluster):
    """torch:ps-sync x2, its parameter server SIGKILLed in epoch 2 of 4: the worker group restarts, the new
    server starts from the checkpointed shard, and the weights equal the uninterrupted repeat's."""
    code, summary, client, killer = run_killing(run_recipe, ray_cluster, "ParameterServer", 1, "--trials",
                                                "torch:ps-sync x2", "--epochs", "4", "--steps-per-epoch", "200",
                                                "--repeats", "2", "--checkpoint-every", "0")
    assert code == 0, summary
    assert len(killer.killed) == 1, killer.killed
    runs = {r.info.run_id: r for r in children(client, summary["parent_run_id"])}
    restarted = [runs[t["run_id"]] for t in summary["trials"] if runs[t["run_id"]].data.metrics.get("restarts")]
    assert len(restarted) == 1 and restarted[0].data.metrics["restarts"] == 1
    assert restarted[0].data.metrics["resumed_from_step"] >= 200  # from epoch 1's checkpoint, not from scratch
    assert restarted[0].data.metrics["checkpoints"] == 4
    for trial in summary["trials"]:
        assert runs[trial["run_id"]].info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(trial["run_id"], "val_accuracy")]
        assert sorted(steps) == [1, 2, 3, 4], steps
    sums = {runs[t["run_id"]].data.tags["param_checksums"] for t in summary["trials"]}
    assert len(sums) == 1, sums
    assert no_train_workers_left()


def test_tf_ps_and_xla_restart_from_their_checkpoints(run_recipe, ray_cluster):
    """tf:ps x2 with a worker task SIGKILLed in epoch 2 of 3, tf:ps x2 with its parameter server SIGKILLed, and
    xla:ddp x2 with a worker SIGKILLed: each FINISHED after one restart from epoch 1's checkpoint (tf:ps: the
    variables the ps held; xla: torch_xla's save of model, optimizer and schedule), every epoch logged once;
    the restarted xla trial ends with the weights of its uninterrupted repeat."""
    kills = {"tf:ps": ["worker-pid-", "ps-pid-"], "xla": ["RayTrainWorker"]}

    def pick(ray, sink):
        names = ray.get(sink.registered.remote(), timeout=30)  # tf:ps processes register by role
        kind = "tf:ps" if any(n.startswith("chief-pid-") for n in names) else "xla"
        if not kills[kind]:
            return None  # the uninterrupted repeat
        victim = kills[kind].pop(0)
        if kind == "xla":
            return max(actor_pids(victim))
        return int(next(n for n in names if n.startswith(victim)).rsplit("-", 1)[1])

    code, summary, client, killer = run_killing(run_recipe, ray_cluster, "RayTrainWorker", 3, "--trials",
                                                "tf:ps x2,xla:ddp x2", "--epochs", "3", "--steps-per-epoch", "200",
                                                "--repeats", "2", "--checkpoint-every", "0", pick=pick)
    assert code == 0, summary
    assert len([k for k in killer.killed if k[1]]) == 3, killer.killed
    runs = {r.info.run_id: r for r in children(client, summary["parent_run_id"])}
    killed_runs = {name.removeprefix("raylab-sink-") for name, pid in killer.killed if pid}
    xla = []
    for trial in summary["trials"]:
        run = runs[trial["run_id"]]
        assert run.info.status == "FINISHED", trial
        restarted = trial["run_id"] in killed_runs
        assert run.data.metrics.get("restarts", 0) == (1 if restarted else 0), trial
        if restarted:
            assert run.data.metrics["resumed_from_step"] >= 200, run.data.metrics
        for key in ("val_accuracy", "epoch_time_s", "train_loss"):
            steps = [m.step for m in client.get_metric_history(trial["run_id"], key)]
            assert sorted(steps) == [1, 2, 3], (trial["trial"], key, steps)
        assert run.data.params["max_failures"] == "1"
        assert run.data.tags["checkpointing"] == "epoch ends"
        assert run.data.metrics["checkpoints"] == 3
        assert run.data.metrics["val_accuracy"] > 0.6, (trial["trial"], run.data.metrics["val_accuracy"])
        if trial["trial"].startswith("xla"):
            xla.append((restarted, run.data.tags["param_checksums"]))
    assert sorted(r for r, _ in xla) == [False, True]
    assert len({sums for _, sums in xla}) == 1, xla  # bit for bit the weights of the uninterrupted run
    assert no_train_workers_left()
