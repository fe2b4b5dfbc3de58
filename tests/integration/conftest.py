"""A real local Ray cluster (2 CPUs, like the machines this runs on), shared by the integration tests, and runs
shared between tests.

A trial's start-up costs 12-20 s here, so one invocation does the work of many assertions: a module-scoped
fixture runs a recipe once through its real command line (`shared_run`) and each test reads what it needs from
that run's summary, MLflow store and console output. A shared run is charged to its own name and declares its
Ray Train start-ups (tests/startups.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import kill_orphaned_workers, paced, raylet_pids
from tests.startups import charged_to

ROOT = Path(__file__).resolve().parents[2]


def held(gate: Path, steps: int, **holds):
    """tests/held_recipe.py's fashion recipe, its Ray Train workers holding at 1.5 x `steps` (mid-epoch 2) until
    a Killer lets them go (its gate directory, made here), and where `holds` say (held_recipe.recipe: at_build,
    last_at); its model code travels by value to the workers, as a recipe file run as a script does.
    RAYLAB_TEST_PACE=k runs every training step k times slower."""
    from ray import cloudpickle

    gate.mkdir(parents=True, exist_ok=True)
    spec = importlib.util.spec_from_file_location("held_recipe", ROOT / "tests" / "held_recipe.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["held_recipe"] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    return module.recipe(gate=str(gate), hold_at=steps * 3 // 2, **holds)


def load_recipe(name: str):
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


@pytest.fixture(scope="package")
def ray_cluster():
    """HOME and the auth token are set by tests/conftest.py (shared with the multi-node cluster)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    raylets = raylet_pids([ray._private.worker._global_node])
    yield ray
    ray.shutdown()
    kill_orphaned_workers(raylets)


def invoke(where: Path, template: Path, recipe, *args) -> tuple[int, dict | None, object]:
    """Runs a recipe through its real command line in `where` (its cwd) against a copy of the template store;
    (exit code, the --json summary or None, an MLflow client of that store)."""
    from mlflow.tracking import MlflowClient

    from raylab.cli import recipe_main

    db = where / "mlflow.db"
    if not db.exists():
        shutil.copy(template, db)
    uri = f"sqlite:///{db}"
    out = where / "summary.json"
    out.unlink(missing_ok=True)
    # A test of anything but the execution pins it: --compile best (the default) races each framework's candidates
    # first, which tests/integration/test_best.py and the README's first run (tests/e2e/test_readme.py) test
    pinned = () if "--compile" in args else ("--compile", "off")
    with contextlib.chdir(where):  # the store's artifacts and raylab-logs/ go under the run's own folder
        code = recipe_main(recipe, ["--tracking-uri", uri, "--json", str(out), *args, *pinned])
    summary = json.loads(out.read_text()) if out.exists() else None
    return code, summary, MlflowClient(tracking_uri=uri)


def recipe_runner(tmp_path, template):
    """Runs a recipe through its real command line on the connected cluster; returns (exit code, summary, client)."""

    def run(recipe, *args):
        return invoke(tmp_path, template, recipe, *args)

    return run


@pytest.fixture
def run_recipe(ray_cluster, tmp_path, template_db):
    return recipe_runner(tmp_path, template_db)


# Lost processes, one trial of each kind killed and restarted beside an uninterrupted repeat, in one invocation
# per family. Read by test_fault_tolerance.py, test_ps.py (the uninterrupted ps-sync against DDP; tf:ps training)
# and test_stream.py (the in-memory twins of the streamed trials: same seed, steps and batch).
# Their steps follow RAYLAB_TEST_PACE (tests/conftest.py `paced`).
LOST_STEPS_N = paced(200)
LOST_STEPS = ["--quick", "--epochs", "3", "--steps-per-epoch", str(LOST_STEPS_N)]  # --quick: 8,192 items, 2,000 to test
# Run order (A B B A): ... jax:dp, torch:ddp, torch:ddp, jax:dp, ...: both kinds' repeats run in warm worker groups.
LOST_WORKERS_TRIALS = "tf:mwms x2,torch:ps-sync x2,xla:ddp x2,jax:dp x2,torch:ddp x2"
# torch:ddp x2 loses a worker in its second repeat, the second trial of its warm worker group (the restarted group
# goes on with that trial, from its own checkpoint); jax:dp x2 in its first, and its second runs in the restarted group.
LOST_WORKERS_PLAN = {
    "torch:ddp x2": [None, "worker"],
    "tf:mwms x2": ["worker", None],
    "torch:ps-sync x2": ["server", None],
    "xla:ddp x2": ["worker", None],
    "jax:dp x2": ["worker", None],
}
# tf:ps on its own: a lost tf:ps task takes TF's coordinator most of a minute to give up on (recovery_s 45-60 s
# here), so both repeats lose one, a worker task and a ps task, and there is no uninterrupted twin.
LOST_TF_PS_PLAN = {"tf:ps x2": ["tf-worker", "tf-ps"]}


@pytest.fixture(scope="package")
def lost_workers(ray_cluster, tmp_path_factory, template_db):
    """Each planned process lost while its trial holds mid-epoch 2 (the held recipe: the fashion MLP, its models
    wrapped), whatever this machine's speed."""
    where = tmp_path_factory.mktemp("lost-workers")
    return shared_run(
        where,
        template_db,
        "lost-workers",
        8,
        held(where / "gate", LOST_STEPS_N),
        "--trials",
        LOST_WORKERS_TRIALS,
        *LOST_STEPS,
        "--repeats",
        "2",
        "--checkpoint-every",
        "0",
        kill=LOST_WORKERS_PLAN,
        seconds=600,
    )


@pytest.fixture(scope="package")
def lost_tf_ps(ray_cluster, tmp_path_factory, template_db):
    """tf:ps's tasks lost while a worker task holds in its graph mid-epoch 2."""
    where = tmp_path_factory.mktemp("lost-tf-ps")
    return shared_run(
        where,
        template_db,
        "lost-tf-ps",
        2,
        held(where / "gate", LOST_STEPS_N),
        "--trials",
        "tf:ps x2",
        *LOST_STEPS,
        "--repeats",
        "2",
        "--checkpoint-every",
        "0",
        kill=LOST_TF_PS_PLAN,
        seconds=260,
    )


class Tee(io.StringIO):
    """Captures a shared run's console for the tests, and writes it to a file as it comes: what a run that hangs
    or times out printed is there to read."""

    def __init__(self, path: Path):
        super().__init__()
        self.file = path.open("a")

    def write(self, text: str) -> int:
        self.file.write(text)
        self.file.flush()
        return super().write(text)


@dataclass
class Ran:
    """One shared invocation: what it returned, its store and what it printed."""

    code: int
    summary: dict | None
    client: object  # MlflowClient of its store
    out: str  # raylab's console on stdout
    err: str
    where: Path  # its cwd: mlflow.db, raylab-logs/
    killer: object = None  # the Killer (tests/integration/killing.py) that ran beside it, if any

    def trials(self) -> dict:
        """Trial name -> its summary entry (a repeated trial: the first)."""
        out = {}
        for t in (self.summary or {}).get("trials", []):
            out.setdefault(t["trial"], t)
        return out

    def run(self, trial: str):
        """The MLflow run of a trial, by name."""
        return self.client.get_run(self.trials()[trial]["run_id"])

    def tail(self) -> str:
        return self.err[-4000:]


def shared_run(
    where: Path,
    template: Path,
    name: str,
    starts: int,
    recipe,
    *args,
    kill: dict | None = None,
    seconds: float | None = None,
) -> Ran:
    """Runs a recipe once for a whole module: its console captured (tests read `out` as they would capsys's), its
    start-ups charged to `name`, which declares `starts` of them and `seconds` of time. kill: a Killer's plan
    (killing.py) to carry out while it runs, {trial name: [victim per repeat]}, at each trial's hold mid-epoch 2: the
    recipe is then the held one (held(), its gate `where`/gate)."""
    import ray

    from tests.integration.killing import Killer

    out, err = Tee(where / "console.out"), Tee(where / "console.err")
    killer = Killer(ray, f"sqlite:///{where / 'mlflow.db'}", kill, where / "gate") if kill else None
    if killer:
        shutil.copy(template, where / "mlflow.db")  # the killer reads trial names from it from the start
        killer.start()
    try:
        with charged_to(name, starts, seconds), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code, summary, client = invoke(where, template, recipe, *args)
    finally:
        if killer:
            killer.stop.set()
            killer.join(timeout=30)
    ran = Ran(code, summary, client, out.getvalue(), err.getvalue(), where, killer)
    out.file.close()
    err.file.close()
    sys.__stderr__.write(f"\n[shared run {name}: exit {code}, {len((summary or {}).get('trials', []))} trials]\n")
    return ran
