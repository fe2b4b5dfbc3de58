"""The cluster walk-through as the pages write it, in the default tier: docs/clusters.md's marked block (a Ray head
with token authentication, an MLflow server, `ray job submit` of the fashion recipe, `raylab compare`, `ray stop`),
then the README's MLflow UI command, run by bash as a user runs them (tests/e2e/test_readme.py `run_as_a_user`: a
copy of the checkout, a HOME of its own, no .venv on PATH); then the README's UI link in headless Chromium, and what
the UI and the MLflow server listen on.

The README test (test_readme.py, full tier) runs the same block after the README's first run, whose kept race
answer the job then reads; here the HOME is fresh, so the job's own invocation races torch's executions before its
trials (`--compile best`, the default) and its parity report must call it fair.
"""

from __future__ import annotations

import os
import re

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.listening import loopback
from tests.e2e.test_readme import (
    LATEST_TRIALS,
    ROOT,
    page_blocks,
    run_as_a_user,
    the_ui_shows_the_latest_trials_and_charts,
)

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 2  # the submitted job's tf:mwms x2 and torch:ddp x2
SECONDS = 170  # measured 122 s (2026-12-06, the 2-core VM)


def walkthrough() -> str:
    """docs/clusters.md's marked block, then the README's `mlflow ui` line (its first block's), as one script."""
    clusters, _, _ = page_blocks((ROOT / "docs" / "clusters.md").read_text(), every=False)
    readme, _, _ = page_blocks((ROOT / "README.md").read_text(), every=True)
    [ui] = [line for block in readme for line in block.splitlines() if " ui " in line and "mlflow" in line]
    assert len(clusters) == 1 and "ray job submit" in clusters[0], clusters
    return f"set -eo pipefail\n# docs/clusters.md\n{clusters[0]}# README.md\n{ui}\n"


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> dict:
    return run_as_a_user(tmp_path_factory.mktemp("walkthrough"), walkthrough(), {})


@pytest.mark.timeout(1800)
def test_a_job_submitted_as_the_docs_write_it_races_trains_and_is_compared(walked):
    out, clone = walked["out"], walked["clone"]
    assert walked["code"] == 0, out[-6000:]
    assert re.search(r"Job 'raysubmit_\w+' succeeded", out), out[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{clone}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("fashion").experiment_id])
    parents = [r for r in runs if r.data.tags.get("raylab.role") == "parent"]
    trials = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
    assert len(parents) == 1 and sorted(r.info.run_name for r in trials) == list(LATEST_TRIALS), [
        (r.info.run_name, r.data.tags.get("raylab.role")) for r in runs
    ]
    assert all(r.info.status == "FINISHED" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    assert all(r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for r in trials)
    assert all(r.data.metrics["val_accuracy"] > 0.6 for r in trials), [r.data.metrics for r in trials]
    # the job held the cluster's node against other jobs, and each trial recorded what ran beside it (speed.md)
    assert all(r.data.tags["node_hold"].startswith("held: 1 node(s)") for r in trials), [r.data.tags for r in trials]
    assert all(re.match(r"node \w{12}: \d\.\d\d cores of other work", r.data.tags["beside"]) for r in trials)
    # --compile best in a fresh HOME: torch's two executions raced on the trial's model before it; tf:mwms has one
    by_name = {r.info.run_name: r.data.params for r in trials}
    ddp, mwms = by_name["torch:ddp x2"], by_name["tf:mwms x2"]
    assert ddp["execution_choice"] == "best" and ddp["race_source"] == "raced", ddp
    assert re.match(r"eager [\d.]+ ms \(first step [\d.]+ s\); inductor [\d.]+ ms", ddp["execution_candidates"]), ddp
    # chosen on what its steps would spend in each (the first step, compilation, included), past the race's noise
    assert re.match(
        r"\d+ steps: eager [\d.]+ s, inductor [\d.]+ s; a lead over the usual execution counts past "
        r"1\.\d\dx$",
        ddp["execution_projected"],
    ), ddp
    assert mwms["execution_candidates"].endswith("(its only candidate)"), mwms
    assert "parity: fair" in out and "parity: UNFAIR" not in out, out[-3000:]
    # what the parity report compared of what the workers built: the models' settings and each framework's count of
    # the work a sample costs (TF's and torch's own counters, the same MLP: 409.1 kFLOP)
    assert re.search(
        r"^    model settings: alike \(\d+ normalization setting\(s\), \d+ dropout rate\(s\), \d+ initial "
        r"parameter spreads and 1 activation call\(s\) compared\)$",  # the MLP's one relu, read alike
        out,
        re.M,
    ), out[-3000:]
    assert "    work per sample (forward and gradients, each framework's own counter): 409.1 kFLOP" in out, out[-3000:]
    assert re.search(r"^trial .* GFLOP/s", out, re.M), out[-3000:]
    # `raylab compare` through the MLflow server printed the job's trials, a row each: read from its own output (its
    # header names the caller's latest invocation; the job's end-of-run table, printed before it, does not)
    header = re.search(
        r"^experiment 'fashion', run fashion [\d: -]+ \(\w{32}\), the latest invocation of yours \(", out, re.M
    )
    assert header, out[-3000:]
    compared = out[header.start() :]
    assert all(re.search(rf"^{re.escape(name)} +FINISHED", compared, re.M) for name in LATEST_TRIALS), compared[-3000:]
    assert "parity: fair" in compared and re.search(r"^chart: raylab-fashion\.png", compared, re.M), compared[-3000:]
    the_race_is_kept_listed_and_cleared(clone.parent / "home")


def the_race_is_kept_listed_and_cleared(home) -> None:
    """The job's race is kept in its HOME's store: `raylab probes` lists it, dated today; `raylab probes clear race`
    forgets it (a run after that reads nothing kept and races, as this fresh HOME's job did)."""
    import subprocess
    import time

    def probes(*argv):
        done = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "raylab"), "probes", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "HOME": str(home)},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    listed = probes("list")
    assert re.search(
        rf"^race +\w+ +{time.strftime('%Y-%m-%d')} \d\d:\d\d:\d\d .*PyTorch, batch 32, fp32, cpu, 1 "
        r"thread\(s\), fashion's model: eager ",
        listed,
        re.M,
    ), listed
    assert "cleared 1 race answer(s)" in probes("clear", "race")
    assert "nothing kept in" in probes("list", "race")


def test_the_readmes_ui_link_opens_on_the_jobs_trials_and_their_charts(walked):
    assert walked["code"] == 0, walked["out"][-3000:]
    the_ui_shows_the_latest_trials_and_charts(walked["ui"])


def test_the_mlflow_ui_and_server_the_pages_start_listen_on_loopback_only(walked):
    """The README's `mlflow ui` and docs/clusters.md's `mlflow server`, still running as the pages leave them, read
    from /proc while the UI served the page above: on 127.0.0.1 only. (The same for a running trial's cluster:
    test_interrupt.py.)"""
    assert walked["code"] == 0, walked["out"][-3000:]
    listeners = walked["ui"]["listeners"]
    assert {("127.0.0.1", 5000), ("127.0.0.1", 5001)} <= set(listeners), listeners
    assert all(loopback(ip) for ip, _ in listeners), listeners
