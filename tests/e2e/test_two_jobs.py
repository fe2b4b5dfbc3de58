"""Two jobs on one `ray start` cluster (docs/speed.md, "Across jobs"): the second waits for the first's hold on the
node and says for whom, so their trials never run at once; a plain CPU burner beside a trial (work no hold can stop)
is recorded as about a core of other work, and the verdict is not fair. The first job's trial, measured alone,
records next to no other work and ends fair.

The drivers connect with --address, as `ray job submit`'s entrypoint does (docs/clusters.md); each has a HOME and an
MLflow store of its own, as two users would."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_interrupt import sqlite_store
from tests.e2e.test_job_submit import BIN, ROOT, free_port

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 3  # job A's trial, job B's, and the trial beside the burner
SECONDS = 80  # measured 78-80 s (2026-12-06, the 2-core VM)

# 3 s of steady steps (--seconds), at most 6,000 steps (torch's fashion MLP, 1 thread: about a thousand steps a
# second here): each trial ends mid-epoch, at its own step
TRIAL = [
    "--quick",
    "--trials",
    "torch:none",
    "--compile",
    "off",
    "--epochs",
    "3",
    "--steps-per-epoch",
    "2000",
    "--seconds",
    "3",
]


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A Ray head on loopback with token authentication and no dashboard; the drivers' environment to reach it."""
    tmp = tmp_path_factory.mktemp("head")
    env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
    }
    env.pop("RAY_AUTH_TOKEN", None)
    (tmp / "home").mkdir()
    subprocess.run(
        [str(BIN / "ray"), "get-auth-token", "--generate"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    port = free_port()
    start = [
        str(BIN / "ray"),
        "start",
        "--head",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]
    try:
        subprocess.run(start, env=env, check=True, capture_output=True, text=True, timeout=120)
        token = (tmp / "home" / ".ray" / "auth_token").read_text().strip()
        yield {**env, "RAY_AUTH_TOKEN": token}, f"127.0.0.1:{port}"
    finally:
        # `ray stop` stops every Ray cluster on this machine: don't run this test beside other Ray work.
        subprocess.run([str(BIN / "ray"), "stop", "--force"], env=env, capture_output=True, timeout=120)


def job(head, where: Path, *more: str) -> tuple[subprocess.Popen, object]:
    """A recipe's driver on the head's cluster from a HOME and an MLflow store of its own: (process, client)."""
    env, address = head
    (where / "home").mkdir(parents=True)
    uri, client = sqlite_store(where)
    cmd = [
        sys.executable,
        str(ROOT / "recipes" / "fashion.py"),
        *TRIAL,
        "--address",
        address,
        "--tracking-uri",
        uri,
        "--experiment",
        "jobs",
        *more,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=where,
        env={**env, "HOME": str(where / "home")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, client


def read_until(proc: subprocess.Popen, pattern: str, timeout: float) -> str:
    """Its output up to the first line matching `pattern` (the process goes on)."""
    seen, deadline = [], time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if re.search(pattern, line) or time.monotonic() > deadline:
            break
    return "".join(seen)


def trial_of(client):
    [run] = [
        r
        for r in client.search_runs([client.get_experiment_by_name("jobs").experiment_id])
        if r.data.tags.get("raylab.role") == "trial"
    ]
    return run


@pytest.fixture(scope="module")
def two_jobs(head, tmp_path_factory) -> dict:
    """Job A takes the node; job B, started once A holds it, waits. {"a", "b": (code, out, client)}."""
    tmp = tmp_path_factory.mktemp("jobs")
    a, a_client = job(head, tmp / "a")
    out = {}
    try:
        a_out = read_until(a, r"^raylab: holding the cluster's 1 node", 180)
        b, b_client = job(head, tmp / "b")
        try:
            b_out, _ = b.communicate(timeout=600)
        finally:
            b.kill()
        rest, _ = a.communicate(timeout=300)
    finally:
        a.kill()
    out["a"], out["b"] = (a.returncode, a_out + rest, a_client), (b.returncode, b_out, b_client)
    return out


def test_a_second_job_waits_for_the_first_and_says_for_whom(two_jobs):
    (a_code, a_out, a_client), (b_code, b_out, b_client) = two_jobs["a"], two_jobs["b"]
    assert a_code == 0 and b_code == 0, (a_out[-3000:], b_out[-3000:])
    assert re.search(
        r"^raylab: waiting for node \w{12}, held by job \w+'s invocation fashion \(\w+\) \(.+ on .+\), "
        r"(trial torch:none x1 )?since \d\d:\d\d:\d\d; this job goes on when it ends",
        b_out,
        re.M,
    ), b_out[-3000:]
    a_run, b_run = trial_of(a_client), trial_of(b_client)
    # never at once: B's trial started after A's ended (both clocks are this machine's)
    assert float(b_run.data.tags["trial_started"]) >= float(a_run.data.tags["trial_ended"]), (
        a_run.data.tags,
        b_run.data.tags,
    )
    assert a_run.data.tags["node_hold"].startswith("held: 1 node(s)"), a_run.data.tags
    assert re.match(r"held: 1 node\(s\) .* after waiting \d+ s for another job", b_run.data.tags["node_hold"])
    # each measured alone: next to no other work beside it, and fair
    for run, out in ((a_run, a_out), (b_run, b_out)):
        assert run.data.metrics["beside_cores"] < 0.25, run.data.tags["beside"]
        assert "parity: fair" in out, out[-3000:]
        # --seconds 3: it ended at the window whose steady steps reached 3 s, before its 6,000 steps
        m = run.data.metrics
        assert run.data.params["seconds"] == "3.0" and 3.0 <= m["steady_s"] < 4.0, (m["steady_s"], m["steps_trained"])
        assert m["steps_trained"] < 6000, m["steps_trained"]
        assert re.search(
            r"^    length: each trial ended at 3 s of steady steps \(--seconds\), after torch:none x1 "
            r"[\d,]+ steps",
            out,
            re.M,
        ), out[-3000:]


def burner() -> int:
    """A plain process (not Ray's, not the trial's) burning one core for 10 minutes: its pid."""
    code = "import time\nend = time.time() + 600\nwhile time.time() < end: pass"
    out = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" >/dev/null 2>&1 & echo $!', sys.executable, code],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(out.stdout.strip())


def test_a_burner_beside_a_trial_is_recorded_and_the_verdict_says_so(head, two_jobs, tmp_path):
    pid = burner()
    try:
        proc, client = job(head, tmp_path / "c")
        out, _ = proc.communicate(timeout=600)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, out[-3000:]
    run = trial_of(client)
    assert 0.6 <= run.data.metrics["beside_cores"] <= 1.4, run.data.tags["beside"]  # about the burner's core
    assert re.match(
        r"node \w{12}: \d\.\d\d cores of other work, \d\.\d\d stolen, Ray and this job \d\.\d\d, the "
        r"trial's own \d\.\d\d of 2 CPUs, over [\d.]+ s$",
        run.data.tags["beside"],
    ), run.data.tags
    assert "parity: UNFAIR (measured beside other work differ)" in out, out[-3000:]
    assert re.search(r"! measured beside other work .*: torch:none x1 beside \d\.\d\d cores of other work", out), out[
        -3000:
    ]
    assert re.search(r"^torch:none x1 \^", out, re.M), out[-3000:]  # the table marks it
