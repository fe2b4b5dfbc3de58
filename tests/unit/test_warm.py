"""Warm worker groups without Ray: which trials share a group, which stay cold and why, what the worker keeps
apart, and how the table shows cold and warm start-ups (raylab/driver/groups.py, raylab/loop/group_worker.py)."""

from __future__ import annotations

from dataclasses import replace

from raylab.config import Settings, TrialSpec
from raylab.compare import stats
from raylab.compare.table import format_table
from raylab.driver.sharing import cold_reason, group_key, setup_of
from raylab.failure import CodeFailure
from raylab.loop.memory import peak_rss_mb, reset_peak_rss
from raylab.loop.group_worker import survivable
from raylab.loop.worker_config import WorkerConfig


def settings(**kw) -> Settings:
    return Settings(trials=[], epochs=1, threads=1, seed=0, quick=True, tracking_uri="x", experiment="e", **kw)


def test_repeats_batches_and_settings_of_a_kind_share_a_group_other_kinds_do_not():
    cfg = settings()
    a, b = TrialSpec("torch", "none", 1), TrialSpec("torch", "none", 1, batch=64)
    assert group_key(cfg, a) == group_key(cfg, b)  # the batch is the trial's, not the processes'
    assert group_key(cfg, a) != group_key(cfg, TrialSpec("torch", "ddp", 1))  # another backend
    assert group_key(cfg, TrialSpec("torch", "ddp", 1)) != group_key(cfg, TrialSpec("torch", "ddp", 2))
    assert group_key(cfg, a) != group_key(replace(cfg, threads=2), a)  # threads are fixed at a process's start
    assert group_key(cfg, a) != group_key(replace(cfg, max_failures=0), a)  # a probe's group has no restarts
    jax = TrialSpec("jax", "none", 1)
    assert group_key(cfg, jax) != group_key(replace(cfg, threads=2), jax)  # PJRT_NPROC in the start environment


def test_two_kinds_share_a_group_where_their_processes_are_set_up_alike():
    """A 1-worker tf:none and tf:mirrored always (the same set-up); torch:none and jax:none join the 1-worker
    torch:ddp's and jax:dp's group only where the invocation has one (they get its process group, unused)."""
    cfg = settings()
    tf, mirrored = TrialSpec("tf", "none", 1), TrialSpec("tf", "mirrored", 1)
    assert group_key(cfg, tf) == group_key(cfg, mirrored)
    assert group_key(cfg, tf) != group_key(cfg, TrialSpec("tf", "mirrored", 2))  # two replicas: more threads
    for framework, dist in (("torch", "ddp"), ("jax", "dp")):
        none, one, two = (TrialSpec(framework, "none", 1), TrialSpec(framework, dist, 1), TrialSpec(framework, dist, 2))
        assert group_key(cfg, none) != group_key(cfg, one)  # alone, torch:none starts no process group
        assert setup_of(none) == none and setup_of(none, [none, two]) == none  # no 1-worker trial to share with
        both = [none, one]
        assert setup_of(none, both) == one and setup_of(one, both) == one
        assert group_key(cfg, none, both) == group_key(cfg, one, both)
        assert group_key(cfg, none, both) != group_key(replace(cfg, threads=2), one, both)
    assert group_key(cfg, TrialSpec("torch", "none", 1)) != group_key(cfg, TrialSpec("jax", "none", 1))


def test_what_stays_cold_says_why():
    cfg, one_node = settings(), True
    assert cold_reason(cfg, TrialSpec("torch", "none", 1), one_node, 1) is None
    assert cold_reason(cfg, TrialSpec("jax", "dp", 2), one_node, 1) is None
    assert "collectives" in cold_reason(cfg, TrialSpec("tf", "mwms", 2), one_node, 1)
    assert "compiled-graph cache" in cold_reason(cfg, TrialSpec("xla", "single", 1), one_node, 1)
    assert "parameter servers" in cold_reason(cfg, TrialSpec("torch", "ps-sync", 2), one_node, 1)
    assert (
        cold_reason(replace(cfg, fresh_processes=True), TrialSpec("torch", "none", 1), one_node, 1)
        == "--fresh-processes"
    )
    assert "streamed" in cold_reason(replace(cfg, streamed=True), TrialSpec("torch", "none", 1), one_node, 1)
    assert "--memory-cap-mb" in cold_reason(
        replace(cfg, memory_cap_mb=2500), TrialSpec("torch", "none", 1), one_node, 1
    )
    assert "--concurrency" in cold_reason(cfg, TrialSpec("torch", "none", 1), one_node, 2)
    assert "several nodes" in cold_reason(cfg, TrialSpec("torch", "none", 1), False, 1)
    cold_cache = replace(cfg, compile_cache="cold")
    assert cold_reason(cold_cache, TrialSpec("torch", "none", 1), one_node, 1) is None  # eager: no cache to empty
    assert "--compile-cache cold" in cold_reason(
        cold_cache, TrialSpec("torch", "none", 1, execution="inductor"), one_node, 1
    )
    assert "--compile-cache cold" in cold_reason(cold_cache, TrialSpec("jax", "none", 1), one_node, 1)


def worker(probe: bool, replicas: int = 1) -> WorkerConfig:
    return WorkerConfig(
        trial="torch:none x1",
        short="none",
        task=None,
        shared=None,
        replicas=replicas,
        batch_per_replica=32,
        epochs=1,
        threads=1,
        seed=0,
        warmup_steps=1,
        trial_start=0.0,
        sink=None,
        probe=probe,
        ps=1,
    )  # Settings.ps is 1 for every trial (the ps kinds read it)


def test_only_a_one_process_probe_that_ran_out_of_memory_leaves_its_group_alive():
    oom, bug = CodeFailure("out of host memory", "out_of_memory"), CodeFailure("ValueError", "error")
    assert survivable(worker(probe=True), oom)
    assert not survivable(worker(probe=True), bug)
    assert not survivable(worker(probe=False), oom)  # a trial's failure ends its group
    assert not survivable(worker(probe=True, replicas=2), oom)  # the other rank may wait in a collective


def test_the_peak_rss_starts_over_from_a_reset():
    grown = bytearray(200 << 20)
    grown[::4096] = b"x" * len(grown[::4096])  # touched: resident
    high = peak_rss_mb()
    del grown
    assert reset_peak_rss()
    assert peak_rss_mb() < high - 150


def row(trial: str, start: str, startup: float, wall: float, sps: float = 100.0) -> dict:
    return {
        "trial": trial,
        "status": "FINISHED",
        "start": start,
        "startup_s": startup,
        "wall_s": wall,
        "samples_per_sec": sps,
        "workers": 1,
    }


def test_cold_and_warm_startups_are_folded_apart_and_marked():
    rows = [
        row("torch:none x1", "cold", 10.0, 20.0),
        row("torch:none x1", "warm", 0.4, 10.0),
        row("torch:none x1", "warm", 0.6, 10.5),
        row("tf:none x1", "cold", 12.0, 22.0),
    ]
    folded = stats.fold(rows)
    torch, tf = folded
    assert (torch["start"], torch["startup_s"], torch["startup_s_warm"]) == ("cold+warm", 10.0, 0.5)
    assert torch["wall_s"] == 20.0 and torch["wall_s_warm"] == 10.25
    assert (tf["start"], tf["startup_s"]) == ("cold", 12.0) and "startup_s_warm" not in tf
    assert stats.shown_startup(torch) == "10.0 / 0.5w"
    assert stats.shown_startup(tf) == "12.0"
    assert stats.shown_startup({"start": "warm", "startup_s": 0.5}) == "0.5w"
    table = format_table(folded)
    assert "10.0 / 0.5w" in table and "(w)" in table


def test_torch_resets_dynamo_only_where_it_ran(monkeypatch):
    """An eager trial leaves dynamo alone (its first reset imports 582 modules, 4.2 s on torch 2.11); a compiled
    one is reset once."""
    import torch
    import torch._dynamo

    from raylab.frameworks.torch import worker

    calls = []
    real = torch._dynamo.reset
    monkeypatch.setattr(torch._dynamo, "reset", lambda: calls.append(1) or real())
    monkeypatch.setattr(worker, "_DYNAMO_AT_RESET", [worker.dynamo_activity()])
    model = torch.nn.Linear(4, 2)
    model(torch.ones(3, 4)).sum().backward()
    worker.reset()
    assert calls == []
    torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    worker.reset()
    worker.reset()
    assert calls == [1]


def test_the_driver_hears_a_trials_end_when_its_last_rank_finishes_without_asking_again():
    """The driver waits on the group's queue (`done_within`), woken by the last rank's `finished`: no polling beside
    the trial's steps (it asked ten times a second before), and a wait with nothing finished ends at its limit."""
    import asyncio
    import time

    from raylab.driver.groups import GroupQueue

    async def go():
        queue = GroupQueue.__ray_metadata__.modified_class(2)  # the actor's class, in this process
        await queue.put(("torch:none", None))
        waiting = asyncio.create_task(queue.done_within(0, 30.0))
        await queue.finished(0, 0)
        await asyncio.sleep(0.05)
        assert not waiting.done()  # one of two ranks
        began = time.monotonic()
        await queue.finished(0, 1, "a probe ran out of memory")
        assert await asyncio.wait_for(waiting, 5) is True and time.monotonic() - began < 1.0
        assert queue.failure_of(0) == "a probe ran out of memory" and queue.first_unfinished() == 1
        began = time.monotonic()
        assert await queue.done_within(1, 0.2) is False and 0.15 < time.monotonic() - began < 5

    asyncio.run(go())
