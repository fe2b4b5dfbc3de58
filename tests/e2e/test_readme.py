"""The README's commands, as written and in order, the way a new user runs them on a fresh clone.

The pages of PAGES are read in that order. Every ```bash block of README.md, and every ```bash block of the
docs pages after it that follows `<!-- readme-test: run -->` (a docs page has many blocks a user does not run
in sequence: only the marked ones run), goes, in order, into one script run by bash (stopping at the first
failing command) in a copy of the repository's files (what a clone has: tracked files and untracked ones git
does not ignore), from its root, with a HOME of its own and a PATH without the virtual environment: no fix-ups
the pages do not show. A README block right after `<!-- readme-test: skip (why) -->` is not run; one right
after `<!-- readme-test: file NAME -->` (on any of the pages) is written to NAME first. So the README's set-up,
first run, MLflow UI, `raylab compare` and own recipe run first, then docs/clusters.md's Ray head, MLflow server,
`ray job submit`, `raylab compare` and `ray stop`. The clone's `.venv` is this checkout's (the set-up it would
make is the one the suite runs in; `scripts/setup.sh` in the README finds it ready). What the script leaves
running in the background (the MLflow UI and server) is stopped at the end, and so is the Ray head if the script
stopped before its `ray stop`. Before that, the README's MLflow UI link is opened in headless Chromium
(tests/e2e/browser.py) on the `mlflow ui` the README started, as a user would.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.e2e.browser import CHARTS, look
from tests.e2e.listening import listening, title

pytestmark = pytest.mark.e2e
# the first run's 4 (one trial per framework), fashion.py --quick's 12 default trials in 9 (tf:mirrored x1, torch:ddp
# x1 and jax:dp x1 run in the warm groups of tf:none, torch:none and jax:none), my_recipe.py's 2, docs/recipes.md's
# my_regression.py 3, docs/data.md's my_shards.py 1, the submitted job's 2
TIER = "full"
RAY_TRAIN_STARTS = 21
SECONDS = 650  # measured 587 s (2026-12-06, the 2-core VM: the first run, the tour, the docs, the job)

ROOT = Path(__file__).resolve().parents[2]
# the README's MLflow UI, MLflow server, Ray head, dashboard and the head's job agent (docs/clusters.md waits for it;
# every Ray node's agent takes 52365, an in-process cluster's too)
PORTS = (5000, 5001, 6379, 8265, 52365)
TIMEOUT_S = 1200
# The link the README gives, and the trials of the latest invocation it then shows: the submitted job's.
UI_LINK = (
    "http://127.0.0.1:5000/#/experiments/1/runs?workflowType=machine_learning&viewStateShareKey=raylab-latest"
    "&compareRunsMode=CHART"
)
LATEST_TRIALS = ("tf:mwms x2", "torch:ddp x2")
FIRST_TRIALS = ("tf:none x1", "torch:none x1", "xla:single x1", "jax:none x1")  # the README's first run


# The pages whose commands run, in this order: the README's every bash block, then the marked blocks of each
# docs page (the cluster walk-through, which needs the first run's mlflow.db and leaves the latest invocation).
PAGES = ("README.md", "docs/recipes.md", "docs/data.md", "docs/clusters.md")
MARKER = re.compile(r"<!-- readme-test: (skip|file|run)(?: \(?(.*?)\)?)? -->")


def page_blocks(text: str, every: bool) -> tuple[list[str], dict[str, str], list[str]]:
    """(the page's runnable bash blocks, {file name: content}, the skipped blocks' reasons). With `every` (the
    README) a bash block runs unless marked skip; without (a docs page) only when marked run."""
    blocks, files, skipped = [], {}, []
    lines = text.splitlines()
    marker, i = None, 0
    while i < len(lines):
        line = lines[i]
        m = MARKER.fullmatch(line.strip())
        if m:
            marker = m.groups()
        elif line.startswith("```"):
            lang = line[3:].strip()
            end = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("```"))
            body = "\n".join(lines[i + 1 : end]) + "\n"
            if marker and marker[0] == "skip":
                skipped.append(marker[1])
            elif marker and marker[0] == "file":
                files[marker[1]] = body
            elif lang == "bash" and (every or (marker and marker[0] == "run")):
                blocks.append(body)
            marker, i = None, end
        elif line.strip():
            marker = None  # a marker applies to the block right after it
        i += 1
    return blocks, files, skipped


def readme_script(root: Path = ROOT) -> tuple[str, dict[str, str], list[str]]:
    """(the bash script of PAGES' runnable blocks, in order, {file name: content}, the skipped blocks' reasons)."""
    blocks, files, skipped = [], {}, []
    for page in PAGES:
        b, f, s = page_blocks((root / page).read_text(), every=page == "README.md")
        blocks += [f"# {page}\n{body}" for body in b]
        files.update(f)
        skipped += s
    return "set -eo pipefail\n" + "\n".join(blocks), files, skipped


def copy_of_checkout(dest: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def in_session(sid: int) -> set[int]:
    """The processes of session `sid` (a script started with start_new_session, and what it left running)."""
    out = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[3]) == sid:
                out.add(int(proc.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def port_busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_readme_parses_into_the_commands_a_user_runs():
    script, files, skipped = readme_script()
    assert (
        script.index("# README.md")
        < script.index("# docs/recipes.md")
        < script.index("# docs/data.md")
        < script.index("# docs/clusters.md")
    )
    assert {"my_regression.py", "my_shards.py"} <= set(files) and "python my_regression.py --quick" in script
    assert "scripts/setup.sh" in script and "recipes/fashion.py --quick" in script
    assert "ray job submit" in script and "raylab compare" in script and "ray stop" in script
    assert "my_recipe.py" in files and "python my_recipe.py" in script
    assert "-m pytest" not in script and "scripts/test.sh" not in script and skipped  # the suite does not run itself
    bash = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert bash.returncode == 0, bash.stderr


def editable_target() -> str:
    """Where the virtual environment's editable install of raylab points."""
    finder = next((ROOT / ".venv").glob("lib/python*/site-packages/__editable___raylab_*_finder.py"))
    return re.search(r"'raylab': '([^']+)'", finder.read_text()).group(1)


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory) -> dict:
    """The README's commands, run once: {"code", "out", "clone", "ui"}; "ui" is what headless Chromium showed at
    the README's UI link, on the `mlflow ui` the README left running, once the commands had ended (None if they
    failed)."""
    script, files, _ = readme_script()
    return run_as_a_user(tmp_path_factory.mktemp("readme"), script, files)


def run_as_a_user(tmp_path: Path, script: str, files: dict[str, str]) -> dict:
    """Runs `script` as the README's user does (a copy of the checkout, a HOME of its own, no .venv on PATH), then
    opens the README's UI link on the `mlflow ui` it left running; stops what it left running, whatever happens."""
    deadline = time.monotonic() + 60  # a cluster a test before this one stopped may still be letting go
    while (busy := [p for p in PORTS if port_busy(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    holders = sorted({(port, pid, title(pid)) for _, port, pid in listening() if port in busy})
    assert not busy, (
        f"ports {busy} are taken ({holders}); the README's commands need them free (stop what listens there)"
    )
    # The clone shares this checkout's .venv: it must be up to date here, so that the README's
    # scripts/setup.sh finds it ready in the clone and does not re-point the editable install at the clone.
    subprocess.run([str(ROOT / "scripts" / "setup.sh")], cwd=ROOT, check=True, capture_output=True, timeout=3600)
    assert Path(editable_target()) == ROOT / "raylab"
    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    copy_of_checkout(clone)
    for name, body in files.items():
        (clone / name).write_text(body)
    (tmp_path / "readme.sh").write_text(script)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if ".venv" not in p)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(home), PATH=path, RAY_USAGE_STATS_ENABLED="0")
    log = open(tmp_path / "readme.out", "w")  # written as it runs: what a timeout leaves is readable
    proc = subprocess.Popen(
        ["bash", str(tmp_path / "readme.sh")],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    ui = None
    try:
        proc.wait(timeout=TIMEOUT_S)
        if proc.returncode == 0:  # the README's `mlflow ui` is still up: look at its link as a user would
            deadline = time.monotonic() + 120  # once it listens (a script that starts it last ends before it does)
            while not port_busy(5000) and time.monotonic() < deadline:
                time.sleep(0.5)
            ui = look(UI_LINK, LATEST_TRIALS)
            # what the script's own processes (the MLflow UI and server it left running) listen on, from /proc
            ui["listeners"] = [(ip, port) for ip, port, pid in listening() if pid in in_session(proc.pid)]
    finally:
        log.close()
        ray_stop = [str(ROOT / ".venv" / "bin" / "ray"), "stop", "--force"]
        if port_busy(6379):  # the script stopped before its own `ray stop`
            subprocess.run(ray_stop, env=env, capture_output=True, timeout=120)
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the MLflow UI and server it left in the background
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while any(port_busy(p) for p in PORTS) and time.monotonic() < deadline:
            time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
    moved = Path(editable_target()) != ROOT / "raylab"
    if moved:  # put it back for the rest of the suite before failing
        subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(ROOT)],
            check=True,
            timeout=600,
        )
    assert not moved, "the README's scripts/setup.sh reinstalled raylab from the clone"
    return {"code": proc.returncode, "out": (tmp_path / "readme.out").read_text(), "clone": clone, "ui": ui}


@pytest.mark.timeout(TIMEOUT_S + 600)
def test_readme_commands_run_as_written(readme_run):
    out, clone = readme_run["out"], readme_run["clone"]
    assert readme_run["code"] == 0, out[-6000:]

    # The first run, the user's own recipe and the submitted job all finished, in the stores the README names.
    assert re.search(r"^tf:none x1 +FINISHED", out, re.M), out[-3000:]
    assert re.search(r"^torch:ddp x1 +FINISHED", out, re.M), out[-3000:]  # my_recipe.py's default trials
    assert re.search(r"Job 'raysubmit_\w+' succeeded", out), out[-3000:]
    # The UI link the README gives is the one the first run printed.
    links = re.findall(r"(http://127\.0\.0\.1:5000/#/experiments/[^\s`)]+)", (ROOT / "README.md").read_text())
    assert links and all(link in out for link in links), (links, out[-3000:])
    assert UI_LINK in links
    client = MlflowClient(tracking_uri=f"sqlite:///{clone}/mlflow.db")
    names = {e.name for e in client.search_experiments()}
    assert {"fashion", "my_recipe", "my_regression", "my_shards"} <= names, names
    docs_recipes_ran_as_the_pages_say(client, out)
    runs = client.search_runs([client.get_experiment_by_name("fashion").experiment_id])
    assert runs and all(r.info.status == "FINISHED" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    parents = [r for r in runs if r.data.tags.get("raylab.role") == "parent"]
    families = {
        p.info.run_id: [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id] for p in parents
    }
    # The first run (one trial per framework, --seconds 5), the tour (--quick: every kind), the submitted job
    first = [kids for kids in families.values() if sorted(r.info.run_name for r in kids) == sorted(FIRST_TRIALS)]
    tour = [
        kids
        for kids in families.values()
        if {"tf:mwms x2", "torch:ddp x2", "jax:dp x2"} <= {r.info.run_name for r in kids}
    ]
    job = [kids for kids in families.values() if sorted(r.info.run_name for r in kids) == list(LATEST_TRIALS)]
    assert len(parents) == 3 and len(first) == len(tour) == len(job) == 1, {
        p: [r.info.run_name for r in k] for p, k in families.items()
    }
    first_run_answers(out, first[0])
    first_run_shares_groups_across_kinds({r.info.run_name: r for r in tour[0]})
    first_run_is_each_framework_at_its_best(out, first[0] + tour[0] + job[0])
    # The submitted job's trials, under one parent run of their own, learned.
    assert all(r.data.metrics["val_accuracy"] > 0.6 for r in job[0]), [r.data.metrics for r in job[0]]
    assert not any(port_busy(p) for p in PORTS)


def docs_recipes_ran_as_the_pages_say(client, out: str) -> None:
    """docs/recipes.md's complete recipe trained in all three frameworks, its models' settings read alike (the
    report is fair: "parity: UNFAIR" is in no output, first_run_is_each_framework_at_its_best); docs/data.md's
    label-sorted .npy shards streamed, shuffled as a whole each pass, and learned."""

    def finished(name):
        runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
        trials = [r for r in runs if r.data.tags.get("raylab.role") == "trial"]
        assert trials and all(r.info.status == "FINISHED" for r in runs), [
            (r.info.run_name, r.info.status) for r in runs
        ]
        return trials

    assert sorted(r.info.run_name for r in finished("my_regression")) == ["jax:none x1", "tf:none x1", "torch:none x1"]
    assert re.search(
        r"^    model settings: alike \(1 normalization setting\(s\), 1 dropout rate\(s\), 8 initial parameter "
        r"spreads and \d+ activation call\(s\) compared\)$",
        out,
        re.M,
    ), out[-3000:]
    [shards] = finished("my_shards")
    assert shards.data.params["shuffle"] == "global" and shards.data.params["data"] == "npy", shards.data.params
    assert shards.data.metrics["val_accuracy"] > 0.6, shards.data.metrics  # chance: 0.25


def first_run_answers(out: str, trials: list) -> None:
    """The README's first command: one trial per framework, each ended at 5 s or more of steady steps (--seconds 5)
    and before its 10 epochs, none marked too short, and the report's answer ranks all four, fastest first."""
    for r in trials:
        m = r.data.metrics
        assert r.data.params["seconds"] == "5.0" and m["steady_s"] >= 5.0, (r.info.run_name, m.get("steady_s"))
        assert m["steps_trained"] < 10 * m["steps_per_epoch"], (r.info.run_name, m["steps_trained"])
    ranked = re.search(r"^  fastest: (\S+ x1), [\d,]+ samples/s; then (.*) \(one run each", out, re.M)
    assert ranked, out[-3000:]
    shown = [ranked.group(1)] + re.findall(r"(\S+:\S+ x1) [\d.]+x", ranked.group(2))
    assert sorted(shown) == sorted(FIRST_TRIALS), shown
    fastest = max(trials, key=lambda r: r.data.metrics["samples_per_sec"])
    assert ranked.group(1) == fastest.info.run_name, ranked.group(0)


def first_run_is_each_framework_at_its_best(out: str, trials: list) -> None:
    """--compile best (the default): torch's and TF's executions raced before the trials (the job's invocation
    reads the answer the first run kept in the same HOME, or has kinds with one candidate: tf:mwms), every trial
    records the choice, and the first run's parity report calls it fair."""
    from raylab.registry import get_strategy

    assert "parity: fair" in out and "parity: UNFAIR" not in out, out[-3000:]
    assert re.search(r"--compile best: PyTorch \(batch 32, fp32\) trains in \S+", out), out[-3000:]
    assert all(r.data.params["execution_choice"] == "best" for r in trials)
    raced = set()
    for r in trials:
        candidates = r.data.params["execution_candidates"]
        if re.match(r"(eager|tf\.function) [\d.]+ ms \(first step [\d.]+ s\); (inductor|xla) [\d.]+ ms", candidates):
            raced.add(r.info.run_name)
            assert r.data.params["race_source"] == "raced" or r.data.params["race_source"].startswith(
                "kept on this host since "
            )
        else:  # jax, torch_xla, and an invocation of tf:mwms alone: nothing to race
            assert len(get_strategy(r.data.params["trial"]).candidates("cpu")) == 1, (r.info.run_name, candidates)
            assert candidates.endswith("(its only candidate)"), (r.info.run_name, candidates)
    assert {"tf:none x1", "tf:mirrored x1", "torch:none x1", "torch:ddp x2"} <= raced, raced
    assert {r.data.tags["optimizer_impl"] for r in trials if r.data.params["framework"] == "torch"} == {"fused"}


def first_run_shares_groups_across_kinds(runs: dict) -> None:
    """The first run's 1-worker tf:mirrored, torch:ddp and jax:dp ran warm in the groups tf:none, torch:none and
    jax:none started, whose processes have the distributed kind's set-up (`group_setup`); torch:none there records
    no process group, since its steps use none."""
    for first, second, setup in (
        ("tf:none x1", "tf:mirrored x1", "tf:none x1"),
        ("torch:none x1", "torch:ddp x1", "torch:ddp x1"),
        ("jax:none x1", "jax:dp x1", "jax:dp x1"),
    ):
        a, b = runs[first].data, runs[second].data
        assert (a.params["start"], a.params["group_index"], b.params["start"], b.params["group_index"]) == (
            "cold",
            "0",
            "warm",
            "1",
        ), (first, second)
        assert a.tags["train_run"] == b.tags["train_run"] and a.tags["group_setup"] == b.tags["group_setup"] == setup
    assert runs["torch:none x1"].data.tags["comm_backend"] == "none"
    assert runs["torch:ddp x1"].data.tags["comm_backend"] == "gloo"


def test_ui_link_opens_on_the_trials_and_their_charts(readme_run):
    """The README's UI link on its `mlflow ui`, after the submitted job logged through its `mlflow server`: the
    rendered page shows the latest invocation's trials and the charts people compare (samples/s, step time, test
    accuracy per epoch and against wall time) without a click, in the section raylab's view puts first."""
    assert readme_run["code"] == 0, readme_run["out"][-3000:]
    the_ui_shows_the_latest_trials_and_charts(readme_run["ui"])


def the_ui_shows_the_latest_trials_and_charts(ui: dict) -> None:
    assert ui["waited"] is None, (ui["waited"], ui["page"][-3000:])
    page, tops = ui["page"], ui["tops"]
    assert "Model metrics (0)" not in page
    # raylab's section comes first: its charts sit above the alphabetical "Model metrics" ones.
    section = next(t for t in tops if t.startswith("raylab: the latest invocation"))
    assert all(tops[c] > tops[section] for c in CHARTS), tops
    if any(t.startswith("Model metrics") for t in tops):
        other = next(t for t in tops if t.startswith("Model metrics"))
        assert all(tops[c] < tops[other] for c in CHARTS), tops
