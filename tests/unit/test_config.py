"""raylab.config and the recipe command line: every user mistake is a UserError before Ray starts."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
import ray

from raylab import cli, data
from raylab.cli.expand import parse_trials, parse_workers
from raylab.settings.resolve import expand_trials
from raylab.config import TrialSpec
from raylab.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def _load_recipe():
    spec = importlib.util.spec_from_file_location("fashion_recipe", ROOT / "recipes" / "fashion.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


RECIPE = _load_recipe()


def config(*argv):
    return cli.make_config(RECIPE, cli.recipe_parser(RECIPE).parse_args(list(argv)))


# --- parse_trials / parse_workers / expand_trials ---------------------------------------


def test_parse_trials_dedupes_in_order():
    """Trials are stripped, blanks dropped and duplicates removed, keeping the first order."""
    assert parse_trials(" torch:ddp, tf:none,,torch:ddp ") == ["torch:ddp", "tf:none"]


def test_a_trial_may_fix_its_own_worker_count():
    specs = expand_trials(parse_trials("tf:none, tf:mwms  x2,torch:ddp x2,xla:single"), [1], [])
    assert [s.name for s in specs] == ["tf:none x1", "tf:mwms x2", "torch:ddp x2", "xla:single x1"]
    with pytest.raises(UserError, match="tf:none runs on at most 1 worker"):
        expand_trials(parse_trials("tf:none x2"), [1], [])
    with pytest.raises(UserError, match="write a worker count as 'KIND xN'"):
        parse_trials("tf:mwms xtwo")


def test_parse_trials_unknown_names_the_choices():
    """An unknown trial is a UserError that names it and lists every known one."""
    with pytest.raises(UserError) as e:
        parse_trials("tf:none,jax:pmap")
    assert "'jax:pmap'" in str(e.value)
    assert all(k in str(e.value) for k in ("tf:none", "tf:mirrored", "tf:mwms", "torch:ddp"))


@pytest.mark.parametrize("text", ["", " , "])
def test_parse_trials_empty(text):
    """An empty trial list is a UserError."""
    with pytest.raises(UserError, match="--trials is empty"):
        parse_trials(text)


def test_parse_workers_ok():
    """Worker counts parse, tolerate spaces and lose duplicates."""
    assert parse_workers("1, 2,1") == [1, 2]


@pytest.mark.parametrize("text", ["0", "1,0", "-1", "a", "1,x", "", ","])
def test_parse_workers_bad(text):
    """Zero, negative, non-integer or empty worker lists are UserErrors quoting the input."""
    with pytest.raises(UserError, match="--workers"):
        parse_workers(text)


def test_expand_single_worker_strategy_skips_with_note():
    """tf:none on workers 1,2 runs only x1 and leaves a note; others run on every count."""
    notes = []
    specs = expand_trials(["tf:none", "torch:ddp"], [1, 2], notes, compiles=["off"])
    assert specs == [TrialSpec("tf", "none", 1), TrialSpec("torch", "ddp", 1), TrialSpec("torch", "ddp", 2)]
    assert [s.name for s in specs] == ["tf:none x1", "torch:ddp x1", "torch:ddp x2"]
    assert len(notes) == 1 and "tf:none" in notes[0] and "workers=2" in notes[0]


def test_expand_single_worker_strategy_with_no_fit():
    """tf:none on workers 2 only has nothing to run: a UserError suggesting a fix."""
    with pytest.raises(UserError, match="tf:none runs on at most 1 worker"):
        expand_trials(["tf:none"], [2], [])


# --- make_config through the recipe's parser ---------------------------------------------


def test_make_config_defaults(tmp_path):
    """The fashion recipe's defaults: 12 trials, 10 epochs, 1 thread, sqlite in the cwd, a note for tf:none."""
    cfg = config()
    assert [s.name for s in cfg.trials] == [
        "tf:none x1",
        "tf:mirrored x1",
        "tf:mirrored x2",
        "tf:mwms x1",
        "tf:mwms x2",
        "torch:none x1",
        "torch:ddp x1",
        "torch:ddp x2",
        "xla:single x1",
        "jax:none x1",
        "jax:dp x1",
        "jax:dp x2",
    ]
    assert (cfg.epochs, cfg.threads, cfg.seed, cfg.quick, cfg.device) == (10, 1, 0, False, "cpu")
    assert cfg.tracking_uri == f"sqlite:///{tmp_path / 'mlflow.db'}" and cfg.experiment == "fashion"
    assert len(cfg.notes) == 4 and cfg.json_path is None  # tf:none, torch:none, xla:single and jax:none skip workers=2


def test_make_config_flags(tmp_path, monkeypatch):
    """--quick means 1 epoch; flags and MLFLOW_TRACKING_URI are honoured; --json may name an existing dir."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://example.invalid:5000")
    cfg = config("--trials", "torch:ddp", "--workers", "2", "--quick", "--threads", "2", "--json", "out.json")
    assert [s.name for s in cfg.trials] == ["torch:ddp x2"]
    assert (cfg.epochs, cfg.threads, cfg.quick, cfg.json_path) == (1, 2, True, Path("out.json"))
    assert cfg.tracking_uri == "http://example.invalid:5000" and cfg.notes == []
    assert config("--quick", "--epochs", "3").epochs == 3


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--epochs", "0"], "--epochs is 0"),
        (["--threads", "0"], "--threads is 0"),
        (["--json", "missing/out.json"], "does not exist"),
        (["--trials", "tf:none", "--workers", "2"], "at most 1 worker"),
        (["--repeats", "0"], "--repeats is 0"),
        (["--steps-per-epoch", "-1"], "--steps-per-epoch is -1"),
    ],
)
def test_make_config_rejects(argv, words):
    """Bad flag values are UserErrors from make_config."""
    with pytest.raises(UserError, match=words):
        config(*argv)


def test_make_config_protocol_flags():
    """--repeats, --plain and --steps-per-epoch (0 = one pass) reach the run config."""
    cfg = config("--repeats", "3", "--plain", "--steps-per-epoch", "7")
    assert (cfg.repeats, cfg.plain, cfg.steps_per_epoch) == (3, True, 7)
    assert config("--steps-per-epoch", "0").steps_per_epoch is None
    with pytest.warns(DeprecationWarning, match="--baseline is now --plain"):
        assert config("--baseline").plain  # 0.2.0's name of the flag works until 0.4.0
    cnn = RECIPE.variant(global_batch=1024, steps_per_epoch=100)
    parse = lambda *a: cli.make_config(cnn, cli.recipe_parser(cnn).parse_args(list(a)))  # noqa: E731
    assert parse().steps_per_epoch == 100 and parse("--quick").steps_per_epoch is None  # quick: one pass
    with pytest.raises(UserError, match="fixes the global batch at 1024, which tf:mwms x3 cannot split evenly"):
        parse("--trials", "tf:mwms", "--workers", "3")


def test_make_config_framework_without_model():
    """A trial whose framework the recipe has no model for is a UserError."""
    tf_only = RECIPE.variant(models={"tf": RECIPE.models["tf"]})
    with pytest.raises(UserError, match="no model for framework"):
        cli.make_config(tf_only, cli.recipe_parser(tf_only).parse_args(["--trials", "tf:none,torch:ddp"]))


# --- recipe_main: exit 2, one error line, no Ray -------------------------------------------


@pytest.fixture
def no_ray(monkeypatch):
    """Fails the test, rather than starting a cluster, if recipe_main gets as far as Ray."""
    from raylab.runtime import cluster

    def refuse(*args, **kwargs):
        raise AssertionError("recipe_main reached cluster.init_ray")

    monkeypatch.setattr(cluster, "init_ray", refuse)
    before = ray.is_initialized()  # False in a unit-only run; the integration suite keeps a cluster up
    yield
    assert ray.is_initialized() is before


def _main_fails(capsys, argv) -> str:
    code = cli.recipe_main(RECIPE, argv)
    out, err = capsys.readouterr()
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("raylab:")]
    assert len(lines) == 1 and lines[0].startswith("raylab: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--trials", "tf:nope"], "unknown trial 'tf:nope'"),
        (["--workers", "0"], "--workers '0'"),
        (["--threads", "0"], "--threads is 0"),
        (["--trials", "tf:none", "--workers", "2"], "at most 1 worker"),
        (["--repeats", "0"], "--repeats is 0"),
        (["--steps-per-epoch", "-1"], "--steps-per-epoch is -1"),
        (["--plain", "--device", "gpu"], "--plain runs the plain scripts on CPU only"),
        (["--plain", "--device", "cpu,gpu:H100"], "--plain runs the plain scripts on CPU only"),
        (["--device", "tpu"], "--device 'tpu': tpu is not a device raylab runs on; choose cpu or gpu"),
        (["--device", "gpu:H 100"], "accelerator type 'H 100' is not one Ray names"),
        (["--device", "gpu:"], "accelerator type '' is not one Ray names"),
        (
            ["--device", "gpu:H100", "--accelerator-type", "A100"],
            "either in --device (gpu:H100) or in --accelerator-type",
        ),
        (["--accelerator-type", ","], "--accelerator-type ',' is empty"),
        (["--seconds", "0", "--trials", "tf:none"], "--seconds is 0; give the seconds of steady steps"),
        (
            ["--seconds", "5", "--trials", "tf:none,torch:ddp", "--workers", "1,2"],
            "--seconds ends a trial when its one training process has timed enough, and torch:ddp x2 train(s) in "
            "several",
        ),
        (["--seconds", "5", "--trials", "tf:ps", "--workers", "1"], "tf:ps x1 train(s) in several processes"),
        (
            ["--seconds", "5", "--trials", "tf:none", "--plain"],
            "--plain runs its plain scripts over the trials' epochs",
        ),
    ],
)
def test_recipe_main_bad_flags_exit_2(no_ray, capsys, argv, words):
    """Bad flags: exit code 2, one 'raylab: error:' line, Ray never started."""
    assert words in _main_fails(capsys, argv)


@pytest.mark.parametrize(
    "trial, module, extra",
    [("tf:none", "tensorflow", "tf"), ("torch:ddp x2", "torch", "torch"), ("xla:single", "torch_xla", "xla")],
)
def test_trial_of_a_framework_not_installed_exits_2_naming_the_extra(no_ray, capsys, monkeypatch, trial, module, extra):
    """An install without that framework (scripts/setup.sh torch has no TensorFlow): one line naming what to
    install, before Ray. (This Python has every framework: the probe is told one is missing.)"""
    from raylab.cli import expand

    real = expand.installed
    monkeypatch.setattr(expand, "installed", lambda name: name != module and real(name))
    line = _main_fails(capsys, ["--trials", trial])
    assert f"trial '{trial}' needs" in line and f"scripts/setup.sh {extra}" in line and f".[{extra}]" in line


def test_without_tensorflow_a_tf_trial_exits_2_before_ray(tmp_path):
    """A Python that cannot import TensorFlow (its site-packages less tensorflow, keras and tf_keras, as
    `scripts/setup.sh torch` leaves it): `--trials tf:none` exits 2 with the one line, and nothing else
    on the way there imports TensorFlow."""
    import subprocess
    import sys
    import sysconfig

    view = tmp_path / "site-packages"
    view.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("tensorflow", "tf_keras", "keras", "tensorboard", "_tensorflow")):
            (view / entry.name).symlink_to(entry)
    env = {**os.environ, "PYTHONPATH": f"{view}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "recipes" / "fashion.py"), "--quick", "--trials", "tf:none"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "raylab: error: trial 'tf:none' needs TensorFlow, which is not installed in this Python; install it with "
        "`scripts/setup.sh tf` (or `pip install -e '.[tf]'`)."
    ]


def test_recipe_main_missing_data_exit_2(no_ray, tmp_path, monkeypatch, capsys):
    """No Fashion-MNIST anywhere on the search path: exit 2 naming the files, before Ray."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(empty))
    monkeypatch.setattr(data.readers, "data_search_path", lambda subdir: [empty])
    line = _main_fails(capsys, ["--quick"])
    assert "fashion-mnist data not found" in line and "train-images-idx3-ubyte.gz" in line


def test_recipe_main_unreachable_tracking_uri_fails_fast(no_ray, fashion_root, monkeypatch, capsys):
    """A dead MLflow server is reported in seconds (no retry loop), with exit 2 and Ray not started."""
    monkeypatch.setenv("RAYLAB_DATA_DIR", str(fashion_root))
    retries = os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES")
    start = time.monotonic()
    line = _main_fails(capsys, ["--quick", "--tracking-uri", "http://127.0.0.1:9"])
    assert time.monotonic() - start < 15
    assert "cannot reach the MLflow tracking store http://127.0.0.1:9" in line
    assert os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES") == retries  # the fail-fast setting is put back


@pytest.mark.parametrize("argv", [["--epochs", "abc"], ["--no-such-flag"]])
def test_recipe_main_argparse_errors_exit_2(no_ray, capsys, argv):
    """Malformed flags stop in argparse with SystemExit(2)."""
    with pytest.raises(SystemExit) as e:
        cli.recipe_main(RECIPE, argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_hardware_axis_runs_each_trial_on_each_device_and_type_named_by_it():
    """--device cpu,gpu x --accelerator-type: every trial on every hardware item, its name saying which; one plain
    --device names nothing (the names and --resume keys of earlier invocations stay)."""
    from raylab.cli.expand import parse_hardware
    from raylab.config import Settings

    assert parse_hardware("cpu") == ["cpu"] and parse_hardware("cpu, gpu,cpu") == ["cpu", "gpu"]
    assert parse_hardware("cpu,gpu", "T4,A100-80G") == ["cpu:T4", "cpu:A100-80G", "gpu:T4", "gpu:A100-80G"]
    assert parse_hardware("gpu:H100,cpu") == ["gpu:H100", "cpu"]
    specs = expand_trials(["torch:none", "jax:none"], [1], [], hardware=parse_hardware("cpu,gpu:H100"))
    assert [s.name for s in specs] == [
        "torch:none x1 on cpu",
        "jax:none x1 on cpu",
        "torch:none x1 on gpu:H100",
        "jax:none x1 on gpu:H100",
    ]
    assert [s.name for s in expand_trials(["torch:none"], [1], [], hardware=["gpu"])] == ["torch:none x1"]
    cfg = Settings(trials=specs, epochs=1, threads=1, seed=0, quick=True, tracking_uri="", experiment="x")
    on = cfg.on(specs[2])
    assert (on.device, on.accelerator_type, cfg.on(specs[0]).device, cfg.on(specs[0]).accelerator_type) == (
        "gpu",
        "H100",
        "cpu",
        None,
    )
    assert on.best is cfg.best and cfg.on(expand_trials(["torch:none"], [1], [])[0]) is cfg


def test_compile_axis_runs_each_kind_in_each_of_its_executions_once():
    """--compile off,on: torch and tf:none both ways, named by what runs; jax:none once (jit either way); a kind
    without a compiled step runs its own way, with a note saying what was skipped."""
    from raylab.cli.expand import parse_compile

    notes = []
    specs = expand_trials(
        ["torch:none", "tf:none", "jax:none", "tf:mwms"], [1], notes, compiles=parse_compile("off,on", "default")
    )
    assert [s.name for s in specs] == [
        "torch:none x1",
        "torch:none x1 inductor",
        "tf:none x1",
        "tf:none x1 xla",
        "jax:none x1",
        "tf:mwms x1",
    ]
    assert [s.executes() for s in specs] == ["eager", "inductor", "tf.function", "xla", "jit", "tf.function"]
    assert [s.compiled() for s in specs] == [False, True, False, True, True, False]
    assert notes == ["tf:mwms has no 'on' execution in raylab (it runs tf.function): skipped"]


def test_compile_modes_are_their_own_trials_and_cuda_graphs_need_a_gpu():
    from raylab.cli.expand import parse_compile

    compiles = parse_compile("on", "default,max-autotune")
    assert compiles == ["on", "on:max-autotune"]
    names = [s.name for s in expand_trials(["torch:ddp x2", "tf:none"], [1], [], compiles=compiles)]
    assert names == ["torch:ddp x2 inductor", "torch:ddp x2 inductor:max-autotune", "tf:none x1 xla"]
    gpu = expand_trials(["torch:none"], [1], [], compiles=parse_compile("on", "reduce-overhead"), hardware=["gpu"])
    assert [s.executes() for s in gpu] == ["inductor:reduce-overhead"]
    with pytest.raises(UserError, match="reduce-overhead is CUDA graphs, which run on a GPU only"):
        expand_trials(["torch:none"], [1], [], compiles=parse_compile("on", "reduce-overhead"))
    with pytest.raises(UserError, match="tf:ps has no 'on' execution"):
        expand_trials(["tf:ps"], [1], [], compiles=["on"])


@pytest.mark.parametrize("values,modes", [("yes", "default"), ("", "default"), ("on", "fast"), ("off", "max-autotune")])
def test_bad_compile_flags_are_one_sentence(values, modes):
    from raylab.cli.expand import parse_compile

    with pytest.raises(UserError, match="--compile"):
        parse_compile(values, modes)


def test_a_plain_script_executes_as_its_framework_single_kind():
    assert TrialSpec("torch", "plain", 1).executes() == "eager"
    assert TrialSpec("torch", "plain", 1, execution="inductor").compiled()
    assert TrialSpec("tf", "plain", 1, execution="xla").name == "tf:plain x1 xla"


def test_seconds_are_settings_and_a_length_people_read():
    """--seconds is kept on the Settings, recorded as a param and said in each trial's header; one-process kinds
    (tf:mirrored runs its replicas in one) take it."""
    cfg = config("--seconds", "5", "--trials", "tf:none,tf:mirrored,torch:none,xla:single,jax:none", "--workers", "1")
    assert cfg.seconds == 5.0 and cfg.length() == "until 5 s of steady steps (at most 10 epoch(s))"
    assert config("--epochs", "3").seconds is None and config("--epochs", "3").length() == "3 epoch(s)"
