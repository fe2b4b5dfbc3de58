"""A trial's driver side without Ray or MLflow: what it records (raylab/driver/trial.py), its workers' start
environment (raylab/driver/trainer.py, raylab/loop/start.py) and the sink's roles (raylab/record/sink.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raylab.loop import start as worker_start
from raylab.record.sink import Attempts, ServerRegistry, TrialLog
from raylab.driver.trainer import worker_env
from raylab.record.figures import agreement, start_env_tag, trial_record
from raylab.registry import get_strategy

FINAL = {
    "samples_per_sec": 900.0,
    "startup_s": 4.0,
    "actual": {"actual_strategy": "none", "global_batch": 32, "strategy_class": "X"},
}
EPOCHS = [
    {"epoch": 1, "epoch_time_s": 3.0, "elapsed_s": 7.0, "train_loss": 0.9, "val_accuracy": 0.5},
    {"epoch": 2, "epoch_time_s": 2.0, "elapsed_s": 9.0, "train_loss": 0.5, "val_accuracy": 0.8},
]


def test_the_result_is_the_final_report_the_last_epoch_and_the_wall_time():
    rec = trial_record(FINAL, EPOCHS, 12.5, 0.75, floor=7.0, asked="none")
    assert rec.result == {
        "samples_per_sec": 900.0,
        "startup_s": 4.0,
        "wall_s": 12.5,
        "train_loss": 0.5,
        "val_accuracy": 0.8,
        "time_to_target_s": 9.0,
        "startup_floor_s": 7.0,
    }
    # Per-epoch names keep their history (step = epoch): only the rest is logged once more.
    assert set(rec.metrics) == {"samples_per_sec", "startup_s", "wall_s", "time_to_target_s", "startup_floor_s"}
    assert rec.tags == {**FINAL["actual"], "requested_strategy": "none"}
    assert rec.params == {"strategy": "none", "shuffle": "global"} and rec.ran == "none"  # in memory: global


def test_what_ran_is_recorded_not_what_was_asked():
    final = {**FINAL, "actual": {"actual_strategy": "mirrored", "global_batch": 256}}
    rec = trial_record(final, EPOCHS, 1.0, None, floor=None, asked="tpu", replicas_found=True)
    assert rec.ran == "mirrored" and rec.params == {"strategy": "mirrored", "global_batch": 256, "shuffle": "global"}
    assert rec.tags["requested_strategy"] == "tpu" and "startup_floor_s" not in rec.result


def test_the_shuffle_a_worker_reports_is_the_shuffle_param():
    """A streamed trial's rank 0 says how its passes were shuffled (raylab/data/shard.py data_facts): a param, which
    parity compares, not a tag; the final report it came in is left as it was (a pure function)."""
    final = {**FINAL, "actual": {**FINAL["actual"], "shuffle": "window 2,621 rows, files in a new seeded order"}}
    rec = trial_record(final, EPOCHS, 1.0, None, floor=None, asked="none")
    assert rec.params["shuffle"] == "window 2,621 rows, files in a new seeded order" and "shuffle" not in rec.tags
    assert final["actual"]["shuffle"].startswith("window")


def test_no_final_report_is_an_error():
    with pytest.raises(RuntimeError, match="without rank 0's final report"):
        trial_record(None, EPOCHS, 1.0, None, None, "none")


def test_replicas_agree_or_there_is_nothing_to_compare():
    assert agreement([1.5, 1.5], ["a", "b"])["replicas_consistent"] is True
    assert agreement([1.5, 2.5], ["a", "a"])["replicas_consistent"] is False
    one = agreement([[1.0]], ["node-1234567890abc"])
    assert one["replicas_consistent"] == "n/a" and one["worker_nodes"] == 1 and one["worker_node_ids"] == "node-1234567"


@pytest.mark.parametrize(
    "kind,device,expected",
    [
        ("tf:none", "cpu", {"CUDA_VISIBLE_DEVICES": ""}),
        ("tf:mwms", "cpu", {"CUDA_VISIBLE_DEVICES": ""}),
        ("tf:ps", "gpu", {"CUDA_VISIBLE_DEVICES": ""}),  # parameter servers never hold a GPU
        ("tf:none", "gpu", {}),
        ("torch:none", "cpu", {}),
        ("torch:ddp", "cpu", {}),
    ],
)
def test_worker_env_tests_the_framework_not_the_short_name(kind, device, expected):
    assert worker_env(get_strategy(kind), None, SimpleNamespace(device=device)) == expected


def test_an_xla_trial_starts_with_pjrt_set():
    env = worker_env(get_strategy("xla:ddp"), SimpleNamespace(pjrt="CPU", threads=2), SimpleNamespace(device="cpu"))
    assert env == {
        "PJRT_DEVICE": "CPU",
        "CPU_NUM_DEVICES": "1",
        "PJRT_NPROC": "2",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=true",
    }


def test_a_process_reports_the_environment_it_started_with(tmp_path, monkeypatch):
    environ = tmp_path / "environ"
    environ.write_bytes(b"PATH=/bin\0CUDA_VISIBLE_DEVICES=\0PJRT_DEVICE=CPU\0")
    monkeypatch.setenv("PJRT_DEVICE", "TPU")  # set later in the process: not what it started with
    assert worker_start.start_env(str(environ)) == {"CUDA_VISIBLE_DEVICES": "", "PJRT_DEVICE": "CPU"}
    assert start_env_tag([{"CUDA_VISIBLE_DEVICES": "", "A": "1"}] * 2) == "A=1,CUDA_VISIBLE_DEVICES="
    assert start_env_tag([]) == "none"


def test_the_sink_keeps_each_epochs_first_arrival_and_each_attempt():
    log = TrialLog([{"epoch": 2, "x": "first"}])
    log.epoch({"epoch": 1, "x": "a"})
    log.epoch({"epoch": 2, "x": "again"})
    assert [e["x"] for e in log.epochs] == ["a", "first"]
    log.note("the split looks sorted")
    log.note("the split looks sorted")  # said again by a restarted worker group: printed once
    assert log.notes == ["the split looks sorted"]
    tries = Attempts()
    tries.start(0.0)
    tries.alive(1.0)
    tries.checkpointed(2.0)
    tries.set_interval(10)
    tries.set_interval(20)
    assert tries.attempts == [{"start": 0.0, "alive": 2.0, "first_step": 1.0, "checkpointed": 2.0}]
    assert tries.steps_interval == 10
    ps = ServerRegistry()
    ps.servers["s0"] = ("handle", [0])
    assert ps.lookup(["s0"]) == [("handle", [0])] and ps.lookup(["s0", "s1"]) is None


def test_a_workers_note_is_one_warning_line_on_raylabs_console(tmp_path, monkeypatch):
    """What rank 0 says of its streamed split (raylab/data/deliver.py: it looks sorted, the shuffle window cannot
    hold it) reaches raylab's console once, as a WARNING under the trial's name, not a Ray log line."""
    import io

    from raylab.driver import progress
    from raylab.runtime import console

    out = io.StringIO()
    monkeypatch.setattr(console, "_console", console.Console(root=tmp_path, stream=out))
    monkeypatch.setattr(progress.ray, "get", lambda refs, timeout=None: refs)  # the fake sink's calls are values
    log = TrialLog()

    class Call:  # an actor method whose .remote() is its value now
        def __init__(self, value):
            self.remote = value

    sink = SimpleNamespace(
        poll=Call(lambda: (None, [], None)), pids=Call(lambda: []), notes=Call(lambda: list(log.notes))
    )
    watch = progress.Progress(sink, tracker=None, run_id="r", label="torch:none x1")
    log.note("the streamed train split looks sorted by 'label'")
    watch.poll()
    log.note("the streamed train split looks sorted by 'label'")  # a restarted worker says it again
    watch.poll()
    assert out.getvalue() == "[torch:none x1] WARNING: the streamed train split looks sorted by 'label'\n"


def test_no_progress_line_follows_its_epochs_end(tmp_path, monkeypatch):
    """A progress report from an epoch whose end the same poll logs (JAX's last report of epoch 1 reached the sink
    beside that epoch's end) prints no line after `epoch 1 done`; the next epoch's report does. The epoch's line
    prints its figures alike."""
    import io

    from raylab.driver import progress
    from raylab.runtime import console

    out = io.StringIO()
    monkeypatch.setattr(console, "_console", console.Console(root=tmp_path, stream=out))
    monkeypatch.setattr(progress.ray, "get", lambda refs, timeout=None: refs)  # the fake sink's calls are values

    class Call:  # an actor method whose .remote() is its value now
        def __init__(self, value):
            self.remote = value

    latest = {"epoch": 1, "epochs": 2, "step": 436, "steps": 439, "samples_per_sec": 900.0, "loss": 0.5}
    ended = {"epoch": 1, "epoch_time_s": 3.0, "train_loss": 0.5, "val_loss": 1.9, "val_accuracy": 0.8}
    polled = {"now": (latest, [ended], None)}
    sink = SimpleNamespace(poll=Call(lambda: polled["now"]), pids=Call(lambda: []), notes=Call(lambda: []))
    tracker = SimpleNamespace(log_metrics=lambda *a, **k: None)
    watch = progress.Progress(sink, tracker=tracker, run_id="r", label="jax:none x1")
    watch.poll()
    # every figure to 4 significant digits, its zeros kept (1.900, not 1.9 beside 0.8123)
    assert out.getvalue().splitlines() == [
        "[jax:none x1] epoch 1 done in 3.0s loss 0.5000 test_loss 1.900 test_accuracy 0.8000"
    ]
    polled["now"] = ({**latest, "epoch": 2, "step": 10}, [ended], None)
    watch.poll()
    assert out.getvalue().splitlines()[-1].startswith("[jax:none x1] epoch 2/2 step 10/439"), out.getvalue()


def test_each_restart_decision_says_the_attempt_it_ended_and_the_processes_then():
    """A failure recorded by the sink (TrialSink.failure, called in the process here) carries the attempt it ended
    and the processes the trial had; the failures tag says both, so two restarts for one kill show which is which."""
    from raylab.record.figures import failures_tag
    from raylab.record.sink import TrialSink

    sink = TrialSink.__ray_actor_class__()
    sink.hello(21786, "10.0.0.1")
    sink.attempt(1.0)
    sink.failure(2.0, "worker process lost (rank 0: ActorDiedError)", "restarted from the last checkpoint")
    sink.hello(22155, "10.0.0.1")
    sink.attempt(3.0)
    tag = failures_tag(sink.failures())
    assert tag == (
        "attempt 1 (pids 21786): worker process lost (rank 0: ActorDiedError) -> restarted from the last checkpoint"
    ), tag
    assert failures_tag([{"what": "x", "decision": "y"}]) == "x -> y"  # a run recorded before attempts were said
