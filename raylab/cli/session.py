"""What a recipe's and a step benchmark's invocations share on the driver: connect, run to the end, finish."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from raylab import config
from raylab.compare.stats import HEADLINE

SUMMARY_KEYS = [
    *HEADLINE,
    "val_loss",
    "compile_time_warmup_s",
    "compiles_after_warmup",
    "time_to_target_s",
    "host_syncs",
    "steps_per_host_sync",
    "nodes_held",
    "overlapped_with",
    "input_wait_share",
    "peak_rss_mb",
    "flops_per_sample",
    "achieved_tflops",
    "utilization",
    "vendor_utilization",
    "cost_usd",
    "cost_to_target_usd",
]


def connect(cfg: config.Settings, address: str | None):
    """The MLflow store, then Ray, then every trial's resource check: UserErrors before anything runs.

    A sqlite store's path is checked first; opening it (a new file's schema takes about 3 s) then overlaps Ray's
    start, and Ray is stopped again if the store fails. A server's store is reached before Ray starts."""
    from raylab.runtime import cluster
    from raylab.driver.resources import check_resources
    from raylab.record.tracking import Tracker
    from raylab.record.uri import check_local_store

    if not check_local_store(cfg.tracking_uri):
        tracker = Tracker(cfg.tracking_uri, cfg.experiment)
        cluster.init_ray(address or os.environ.get("RAY_ADDRESS"))
    else:
        tracker = _open_store_while_ray_starts(cfg, address)
    check_resources(cfg)
    return tracker


def _open_store_while_ray_starts(cfg: config.Settings, address: str | None):
    from concurrent.futures import ThreadPoolExecutor

    import ray

    from raylab.runtime import cluster
    from raylab.record.tracking import Tracker

    started = not ray.is_initialized()
    with ThreadPoolExecutor(1, thread_name_prefix="raylab-store") as pool:
        opening = pool.submit(Tracker, cfg.tracking_uri, cfg.experiment)
        try:
            cluster.init_ray(address or os.environ.get("RAY_ADDRESS"))
        finally:
            try:
                tracker = opening.result()
            except BaseException:
                if started and ray.is_initialized():
                    ray.shutdown()
                raise
    return tracker


def stoppable(command) -> int:
    """command() -> exit status, under the stop signals (SIGTERM, SIGHUP, Ctrl-C: raylab/runtime/stopping.py) from
    before Ray starts to after it is shut down: a stop before the trials ends the command with status 130 and nothing
    running, and the Ray connection this command made (its in-process cluster) ends with it, however it ends."""
    from raylab.runtime import cluster, stopping
    from raylab.driver.outcome import INTERRUPTS

    with stopping.taken():
        try:
            return command()
        except INTERRUPTS:
            print("raylab: stopped before any trial ran; nothing was recorded", file=sys.stderr)
            return 130
        finally:
            cluster.shut_down()


def run_tags(recipe_file: str | None) -> dict:
    from raylab.record.provenance import driver_versions, git_commit
    from raylab.loop.worker_config import host_facts

    where = Path(recipe_file).resolve().parent if recipe_file else Path.cwd()
    facts = host_facts()
    return {
        **driver_versions(),
        "git_commit": git_commit(where),
        "driver_host": facts["host"],
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }


def run_to_end(cfg: config.Settings, tracker, run) -> int:
    """run(tags) -> (parent id, outcomes), then the summary and comparison; a stop signal (stoppable()) during the
    trials ends them KILLED, and the command with status 130."""
    from raylab.driver import hold
    from raylab.driver.outcome import INTERRUPTS

    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    with hold.kept_until_done():  # the nodes stay this job's until its own comparison is drawn
        try:
            parent_id, outcomes = run(run_tags(main_file))
        except INTERRUPTS:
            print(
                "raylab: interrupted; the running trial and its parent are marked KILLED in MLflow; "
                "go on with it later with --resume last",
                file=sys.stderr,
            )
            tracker.close(wait_s=10)
            return 130
        return _compared(cfg, tracker, parent_id, outcomes)


def _compared(cfg: config.Settings, tracker, parent_id: str, outcomes: list) -> int:
    from raylab.driver.outcome import INTERRUPTS

    try:
        return finish(cfg, tracker, parent_id, outcomes)
    except INTERRUPTS:
        print(
            f"raylab: stopped while comparing; every trial is recorded: raylab compare --experiment "
            f"{cfg.experiment} shows them",
            file=sys.stderr,
        )
        return 130


def summary(cfg: config.Settings, parent_id: str, outcomes: list) -> dict:
    from raylab.record.tracking import error_summary

    return {
        "experiment": cfg.experiment,
        "parent_run_id": parent_id,
        "tracking_uri": cfg.tracking_uri,
        "trials": [
            {
                "trial": o.ran_name,
                "framework": o.spec.framework,
                "strategy": o.ran or o.spec.short,
                "requested_strategy": o.spec.short,
                "execution": o.spec.executes(),
                "workers": o.spec.workers,
                "hardware": o.spec.hardware,
                "repeat": o.repeat,
                "status": o.status,
                "run_id": o.run_id,
                **o.start,
                "error": error_summary(o.error) if o.error else None,
                **{k: o.result.get(k) for k in SUMMARY_KEYS},
            }
            for o in outcomes
        ],
    }


def finish(cfg: config.Settings, tracker, parent_id: str, outcomes: list) -> int:
    """The JSON summary, the comparison and the MLflow hint; the exit status."""
    if cfg.json_path:
        cfg.json_path.write_text(json.dumps(summary(cfg, parent_id, outcomes), indent=2))
    from raylab.compare.table import compare

    code = 0 if all(o.status == "FINISHED" for o in outcomes) else 1
    if tracker.close() is not None:  # the server is still away: nothing to compare from yet
        return code
    parent_id = tracker.ids.get(parent_id, parent_id)
    chart = Path(f"raylab-{cfg.experiment}-{parent_id[:8]}.png")
    print("\n" + compare(tracker, cfg.experiment, parent_id, "table", chart))
    tracker.close()
    print(tracker.ui_hint(cfg.experiment))
    return code
