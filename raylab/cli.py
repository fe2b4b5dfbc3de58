"""Entry points: a recipe's own command line, and `raylab compare`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import textwrap
import threading
from pathlib import Path

from raylab import config as C
from raylab.backends.tpu import parse_topology, parse_tpu_type
from raylab.errors import UserError
from raylab.overrides import parse_batches
from raylab.task import OPTIMIZERS

SUMMARY_KEYS = ["samples_per_sec", "step_time_p50_ms", "step_time_p90_ms", "startup_s", "first_step_s",
                "wall_s", "val_accuracy", "val_loss", "compile_time_warmup_s", "compiles_after_warmup", "time_to_target_s",
                "host_syncs", "steps_per_host_sync", "nodes_held", "overlapped_with"]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None


def _concurrency(text: str) -> int | None:
    """--concurrency: a positive count, or 'auto' (None: as many trials as the cluster's nodes allow)."""
    if text == "auto":
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"'{text}' is not a positive number of trials or 'auto'")


def _task_flags(p: argparse.ArgumentParser, recipe) -> None:
    """--batch, --optimizer, --lr and --set: what people sweep or change in a recipe's task."""
    batch_what = "global batch (split over the replicas)" if recipe.global_batch else "batch per replica"
    p.add_argument("--batch", default=None, metavar="B[,B...]",
                   help=f"{batch_what}; several sizes make a sweep axis like --workers: every trial runs at each, "
                        f"named '... bB' (default: {recipe.global_batch or recipe.batch_per_replica})")
    opt = recipe.optimizer
    p.add_argument("--optimizer", default=None, choices=sorted(OPTIMIZERS),
                   help="the optimizer, keeping the recipe's learning rate and the arguments it takes (default: "
                        f"{getattr(opt, 'name', 'custom')})")
    p.add_argument("--lr", type=float, default=None,
                   help=f"learning rate (default: {getattr(opt, 'lr', 'set by the custom optimizer')})")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="change any recipe field for this run, e.g. --set epochs=3, --set optimizer.momentum=0.9, "
                        "--set schedule.name=cosine, --set schedule.warmup=100 (repeatable; recorded as params)")


def recipe_parser(recipe) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python recipes/{recipe.name}.py",
        description=textwrap.dedent(recipe.doc or "").strip() or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trials", default=",".join(recipe.default_trials),
                   help="comma-separated framework:strategy list, each on every --workers count it supports, "
                        "or with its own count: 'tf:none,tf:mwms x2' (default: %(default)s); "
                        f"known: {', '.join(sorted(C.STRATEGIES))}")
    p.add_argument("--workers", default=",".join(map(str, recipe.default_workers)),
                   help="comma-separated replica counts, each trial runs on each (default: %(default)s)")
    _task_flags(p, recipe)
    p.add_argument("--epochs", type=_int, default=None, help=f"passes over the data (default: {recipe.epochs}; 1 with --quick)")
    p.add_argument("--steps-per-epoch", type=_int, default=None, metavar="N",
                   help="training steps per epoch, the data repeating as needed; 0 = one pass over each worker's "
                        "shard (default: " + (f"{recipe.steps_per_epoch}" if recipe.steps_per_epoch else "one pass")
                        + "; one pass with --quick)")
    p.add_argument("--window", type=_int, default=C.DEFAULT_WINDOW, metavar="K",
                   help="training steps between host reads: loss and metrics add up on the device and are read "
                        "once per K steps (and at each epoch's end); TF runs the K steps as one tf.function call "
                        "(default: %(default)s)")
    p.add_argument("--step-latency", action="store_true",
                   help="read back after every step (--window 1) so step_time_p50/p90 are per-step latencies; "
                        "slower, and recorded as step_timing='per step (synced)'")
    p.add_argument("--repeats", type=_int, default=1, metavar="N",
                   help="run every trial N times, interleaved (A B B A ...), each its own MLflow run; the "
                        "comparison shows medians, the min..max range and which differences are significant "
                        "(default: %(default)s)")
    p.add_argument("--concurrency", type=_concurrency, default=1, metavar="N|auto",
                   help="run up to N trials at the same time, each on whole nodes no other running trial uses "
                        "(its workers are placed only there, so trials never share cores); 'auto': as many as the "
                        "cluster's nodes allow. Each trial records the nodes it held and the trials it overlapped "
                        "with. On a single-node cluster trials still run one at a time (default: 1)")
    p.add_argument("--baseline", action="store_true",
                   help="also run each framework's 1-worker job as a plain script (no Ray, no raylab; same model, "
                        "data, batch, threads, seed), beside the trials: the comparison shows raylab's overhead")
    p.add_argument("--ps", type=_int, default=1,
                   help="parameter servers for tf:ps and torch:ps-* trials, beside --workers workers (default: %(default)s)")
    p.add_argument("--threads", type=_int, default=1,
                   help="intra-op threads per replica, set in TF and torch and recorded (default: %(default)s)")
    p.add_argument("--seed", type=_int, default=recipe.seed, help="init, shuffle and shard seed (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {recipe.quick_train} train / {recipe.quick_test} test items, 1 epoch")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="what each replica runs on (default: cpu)")
    p.add_argument("--tpu-fallback", choices=["error", "mirrored"], default="error",
                   help="tf:tpu where no TPU is found: 'error' stops before training (default); 'mirrored' runs "
                        "MirroredStrategy instead and records requested_strategy=tpu, actual_strategy=mirrored")
    p.add_argument("--tpu-type", default=None, metavar="TYPE",
                   help="TPU slice type for TPU trials, e.g. v4-8: tf:tpu asks Ray for TPU-TYPE-head")
    p.add_argument("--tpu-topology", default=None, metavar="AxBxC",
                   help="the slice's chip topology, e.g. 2x2x1: with --tpu-type, Ray reserves the whole slice for "
                        "multi-worker TPU trials (xla:ddp with PJRT_DEVICE=TPU)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default=recipe.precision,
                   help="asked-for precision; bf16 is applied only where supported (xla on TPU) and the "
                        "applied one is recorded as precision_applied (default: %(default)s)")
    p.add_argument("--max-failures", type=_int, default=1, metavar="N",
                   help="worker-group restarts per trial after a lost worker or node: Ray Train restarts the trial "
                        "from its last checkpoint (restarts, recovery_s and lost_s are recorded); 0 = fail at once "
                        "and take no checkpoints; -1 = no limit (default: %(default)s)")
    p.add_argument("--checkpoint-every", type=float, default=10.0, metavar="MIN",
                   help="besides every epoch's end, checkpoint inside an epoch every MIN minutes of training "
                        "(0 = at epoch ends only; default: %(default)s)")
    p.add_argument("--storage", default=None, metavar="PATH|URI",
                   help="where Ray Train keeps each trial's checkpoints: a directory every node can reach, or a URI "
                        "Ray Train accepts such as gs://bucket/path (default: ~/ray_results)")
    p.add_argument("--resume", default=None, metavar="RUN_ID|last",
                   help="go on with an interrupted invocation (driver crash, `ray job stop`, lost head node): run "
                        "the trials of that parent run that did not finish, under the same parent, each from its "
                        "last checkpoint; finished trials are not run again. The rest of the command is the "
                        "recorded one ('last': the experiment's latest invocation)")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the working directory)")
    p.add_argument("--experiment", default=recipe.name, help="MLflow experiment name (default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write a machine-readable summary here")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: $RAY_ADDRESS, else a new in-process local cluster)")
    p.add_argument("--verbose", action="store_true",
                   help="also show Ray's, TensorFlow's, XLA's and gloo's output live; by default it goes only to a "
                        "log file per trial under raylab-logs/ (an artifact of the trial's MLflow run, named when "
                        "a trial fails)")
    return p


# What --resume may be given beside it: where to look and where to run; the rest is the recorded command's.
RESUME_FLAGS = {"resume", "tracking_uri", "experiment", "json", "address", "verbose"}


def resumed_argv(recipe, args, argv: list[str]) -> tuple[list[str], str]:
    """(the recorded command line of the invocation --resume names, its parent run id); UserError if that
    run is not a raylab invocation or other flags were given beside --resume."""
    from raylab.tracking import Tracker

    defaults = recipe_parser(recipe).parse_args([])
    extra = sorted(k for k, v in vars(args).items() if k not in RESUME_FLAGS and v != getattr(defaults, k))
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise UserError(f"--resume runs the recorded command of the run it resumes; drop {flags} "
                        "(only --tracking-uri, --experiment, --address and --json go with it).")
    tracker = Tracker(args.tracking_uri or C.default_tracking_uri(), args.experiment)
    parent = tracker.parent_run(args.resume)
    recorded = parent.data.tags.get("raylab.argv")
    if recorded is None:
        raise UserError(f"run {parent.info.run_id} has no recorded command (it is not a raylab invocation, or "
                        "was made before --resume existed); run the recipe again instead.")
    return [*json.loads(recorded), *without_flags(argv, ("--resume",))], parent.info.run_id


def make_config(recipe, args) -> C.RunConfig:
    notes: list[str] = []
    kinds = C.parse_trials(args.trials)
    workers = C.parse_workers(args.workers)
    batches = parse_batches(args.batch)
    epochs = C.check_positive("epochs", args.epochs if args.epochs is not None else (1 if args.quick else recipe.epochs))
    missing = sorted({C.get_strategy(C.split_trial(k)[0]).models for k in kinds} - set(recipe.models))
    if missing:
        raise UserError(f"recipe '{recipe.name}' has no model for framework(s) {', '.join(missing)}; "
                        f"choose trials of {', '.join(sorted(recipe.models))}.")
    steps = args.steps_per_epoch if args.steps_per_epoch is not None else (None if args.quick else recipe.steps_per_epoch)
    if steps is not None and steps < 0:
        raise UserError(f"--steps-per-epoch is {steps}; give a positive number of steps, or 0 for one pass over the data.")
    trials = C.expand_trials(kinds, workers, notes, batches if len(batches) > 1 else [None])
    uneven = [s.name for s in trials if recipe.global_batch and recipe.with_batch(s.batch).global_batch % s.workers]
    if uneven:
        raise UserError(f"{recipe.name} fixes the global batch at {recipe.global_batch}, which {', '.join(uneven)} "
                        "cannot split evenly over its replicas; choose --workers that divide it.")
    if args.baseline and args.device != "cpu":
        raise UserError("--baseline runs the plain scripts on CPU only; drop --baseline or use --device cpu.")
    if args.json is not None and not args.json.parent.resolve().is_dir():
        raise UserError(f"--json {args.json}: directory {args.json.parent} does not exist; create it first.")
    return C.RunConfig(
        trials=trials, epochs=epochs, steps_per_epoch=steps or None,
        threads=C.check_positive("threads", args.threads), seed=args.seed, quick=args.quick,
        tracking_uri=args.tracking_uri or C.default_tracking_uri(), experiment=args.experiment,
        json_path=args.json, device=args.device, precision=args.precision, notes=notes,
        tpu_fallback=args.tpu_fallback, ps=C.check_positive("ps", args.ps), tpu_type=parse_tpu_type(args.tpu_type),
        tpu_topology=parse_topology(args.tpu_topology), repeats=C.check_positive("repeats", args.repeats),
        baseline=args.baseline, window=1 if args.step_latency else C.check_positive("window", args.window),
        max_failures=check_failures(args.max_failures), checkpoint_every_min=check_minutes(args.checkpoint_every),
        storage=args.storage, concurrency=args.concurrency,
    )


def check_failures(n: int) -> int:
    if n < -1:
        raise UserError(f"--max-failures is {n}; give 0 (fail at once), a number of restarts, or -1 (no limit).")
    return n


def check_minutes(m: float) -> float:
    if not m >= 0:
        raise UserError(f"--checkpoint-every is {m}; give minutes >= 0 (0: checkpoint at epoch ends only).")
    return m


def edited(recipe, args):
    """The recipe with this command line's --set, --optimizer, --lr and a single --batch applied."""
    from raylab.overrides import apply_overrides

    recipe = apply_overrides(recipe, args.set, args.optimizer, args.lr)
    batches = parse_batches(args.batch)
    return recipe.with_batch(batches[0]) if len(batches) == 1 else recipe


def load_data(recipe, cfg: C.RunConfig):
    """The recipe's data, checked, and its task checked against it: UserErrors before Ray starts."""
    from raylab.data import as_dataset
    from raylab.task import check

    ds = as_dataset(recipe.data, recipe.name)
    check(recipe.task(ds.target_names), ds.target_names)
    return ds.subset(recipe.quick_train, recipe.quick_test) if cfg.quick else ds


def run_tags(recipe_file: str | None) -> dict:
    from raylab.tracking import driver_versions, git_commit
    from raylab.worker import host_facts

    where = Path(recipe_file).resolve().parent if recipe_file else Path.cwd()
    facts = host_facts()
    return {**driver_versions(), "git_commit": git_commit(where), "driver_host": facts["host"],
            "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:])}


def summary(cfg: C.RunConfig, parent_id: str, outcomes: list) -> dict:
    return {
        "experiment": cfg.experiment, "parent_run_id": parent_id, "tracking_uri": cfg.tracking_uri,
        "trials": [{"trial": o.ran_name, "framework": o.spec.framework, "strategy": o.ran or o.spec.strategy,
                    "requested_strategy": o.spec.strategy,
                    "workers": o.spec.workers, "repeat": o.repeat, "status": o.status, "run_id": o.run_id,
                    **{k: o.result.get(k) for k in SUMMARY_KEYS}} for o in outcomes],
    }


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """`ray job stop` and schedulers send SIGTERM: end the runs as KILLED, as Ctrl-C does."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def connect(cfg: C.RunConfig, address: str | None):
    """The MLflow store, then Ray, then every trial's resource check: UserErrors before anything runs.

    A sqlite store's path is checked first; opening it (a new file's schema takes about 3 s) then overlaps Ray's
    start, and Ray is stopped again if the store fails. A server's store is reached before Ray starts."""
    from concurrent.futures import ThreadPoolExecutor

    from raylab import launcher
    from raylab.tracking import Tracker, check_local_store

    if not check_local_store(cfg.tracking_uri):
        tracker = Tracker(cfg.tracking_uri, cfg.experiment)
        launcher.init_ray(address or os.environ.get("RAY_ADDRESS"))
    else:
        import ray

        started = not ray.is_initialized()
        with ThreadPoolExecutor(1, thread_name_prefix="raylab-store") as pool:
            opening = pool.submit(Tracker, cfg.tracking_uri, cfg.experiment)
            try:
                launcher.init_ray(address or os.environ.get("RAY_ADDRESS"))
            finally:
                try:
                    tracker = opening.result()
                except BaseException:
                    if started and ray.is_initialized():
                        ray.shutdown()
                    raise
    launcher.check_resources(cfg)
    return tracker


def run_to_end(cfg: C.RunConfig, tracker, run) -> int:
    """run(tags) -> (parent id, outcomes), with SIGTERM taken as Ctrl-C; then the summary and comparison."""
    from raylab.outcome import INTERRUPTS

    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    try:
        with _sigterm_as_interrupt():
            parent_id, outcomes = run(run_tags(main_file))
    except INTERRUPTS:
        print("raylab: interrupted; the running trial and its parent are marked KILLED in MLflow; "
              "go on with it later with --resume last", file=sys.stderr)
        tracker.close(wait_s=10)
        return 130
    return finish(cfg, tracker, parent_id, outcomes)


def recipe_main(recipe, argv: list[str] | None = None) -> int:
    """Runs a recipe's trial matrix: validate everything, then Ray, then the trials, then compare."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = recipe_parser(recipe).parse_args(argv)
    from raylab import console

    console.install(console.Console(verbose=args.verbose, name=args.experiment)).quiet_libraries()
    resume = None
    try:
        if args.resume:
            argv, resume = resumed_argv(recipe, args, argv)
            args = recipe_parser(recipe).parse_args(argv)
            args.resume = resume
        recipe = edited(recipe, args)
        cfg = make_config(recipe, args)
        cfg.resume = resume
        ds = load_data(recipe, cfg)
        tracker = connect(cfg, args.address)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    from raylab.data import num_items

    for note in cfg.notes + ([ds.note] if ds.note else []):
        print(f"raylab: note: {note}")
    print(f"raylab: {recipe.name} on {ds.name} ({num_items(ds.x_train)} train / {num_items(ds.x_test)} test items from "
          f"{ds.source}); trials: {', '.join(s.name for s in cfg.trials)}", flush=True)
    from raylab import launcher

    # The command as given (less --resume and where-to-look flags): what --resume runs again.
    recorded = json.dumps(without_flags([a for a in argv if a != "--verbose"],
                                        ("--resume", "--tracking-uri", "--experiment", "--json", "--address")))
    return run_to_end(cfg, tracker, lambda tags: launcher.run_recipe(recipe, cfg, ds, tracker,
                                                                     {**tags, "raylab.argv": recorded}))


def without_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """argv less those flags and their values ('--flag value' and '--flag=value')."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        elif not a.startswith(tuple(f + "=" for f in flags)):
            out.append(a)
    return out


def bench_parser(bench) -> argparse.ArgumentParser:
    from raylab.stepbench import KINDS

    p = argparse.ArgumentParser(prog=f"python recipes/{bench.name}.py",
                                description=textwrap.dedent(bench.doc or "").strip() or None,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", default=",".join(bench.default_trials),
                   help=f"comma-separated trials (default: %(default)s); known: {', '.join(KINDS)}")
    p.add_argument("--iterations", type=_int, default=bench.iterations,
                   help=f"timed {bench.what}s per trial, after {bench.warmup} warm-up ones (default: %(default)s)")
    p.add_argument("--repeats", type=_int, default=1, metavar="N",
                   help="run every trial N times, interleaved, each its own MLflow run (default: %(default)s)")
    p.add_argument("--threads", type=_int, default=1, help="intra-op threads (and CPUs) per trial (default: %(default)s)")
    p.add_argument("--seed", type=_int, default=0, help="seed of the synthetic inputs and weights (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: batch {bench.quick_batch}, 1 warm-up + {bench.quick_iterations} timed {bench.what}s")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16 autocast is applied on CUDA (torch) and XLA TPU only; the applied one is recorded "
                        "(default: %(default)s)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                   help="what each trial runs on; gpu gives each trial one of the cluster's GPUs (default: cpu)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here)")
    p.add_argument("--experiment", default=bench.name, help="MLflow experiment name (default: %(default)s)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH", help="write a machine-readable summary here")
    p.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS, else a new local cluster)")
    return p


def bench_main(bench, argv: list[str] | None = None) -> int:
    """Runs a step benchmark's trials (raylab.stepbench), then the comparison."""
    from raylab.stepbench import check_trials, run_bench

    args = bench_parser(bench).parse_args(argv)
    try:
        kinds = C.parse_trials(args.trials)
        check_trials(bench, kinds)
        cfg = C.RunConfig(trials=[C.TrialSpec(*k.split(":"), 1) for k in kinds], epochs=1,
                          threads=C.check_positive("threads", args.threads), seed=args.seed, quick=args.quick,
                          tracking_uri=args.tracking_uri or C.default_tracking_uri(), experiment=args.experiment,
                          json_path=args.json, precision=args.precision, device=args.device,
                          steps_per_epoch=C.check_positive("iterations", args.iterations),
                          repeats=C.check_positive("repeats", args.repeats))
        if "xla:single" in kinds:
            C.get_strategy("xla:single").preflight(cfg, {})
        tracker = connect(cfg, args.address)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    return run_to_end(cfg, tracker, lambda tags: run_bench(bench, cfg, tracker, tags))


def finish(cfg: C.RunConfig, tracker, parent_id: str, outcomes: list) -> int:
    """The JSON summary, the comparison and the MLflow hint; the exit status."""
    if cfg.json_path:
        cfg.json_path.write_text(json.dumps(summary(cfg, parent_id, outcomes), indent=2))
    from raylab.compare import compare

    code = 0 if all(o.status == "FINISHED" for o in outcomes) else 1
    if tracker.close() is not None:  # the server is still away: nothing to compare from yet
        return code
    parent_id = tracker.ids.get(parent_id, parent_id)
    chart = Path(f"raylab-{cfg.experiment}-{parent_id[:8]}.png")
    print("\n" + compare(tracker, cfg.experiment, parent_id, "table", chart))
    tracker.close()
    print(tracker.ui_hint(cfg.experiment))
    return code


def compare_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="raylab compare",
                                description="Print the trials of a raylab invocation side by side, from MLflow.")
    p.add_argument("--experiment", required=True, help="MLflow experiment name (a recipe's --experiment)")
    p.add_argument("--run", default=None, help="parent run id (default: the experiment's latest invocation)")
    p.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format (default: table)")
    p.add_argument("--chart", type=Path, default=None,
                   help="PNG path for the chart (default: raylab-EXPERIMENT.png; with table format)")
    args = p.parse_args(argv)
    try:
        from raylab.compare import compare
        from raylab.tracking import Tracker

        uri = args.tracking_uri or C.default_tracking_uri()
        if uri.startswith("sqlite:") and not Path(uri.split("sqlite:///", 1)[-1]).exists():
            raise UserError(f"no MLflow store at {uri}; run a recipe first or pass --tracking-uri.")
        tracker = Tracker(uri)
        chart = args.chart or Path(f"raylab-{args.experiment}.png")
        print(compare(tracker, args.experiment, args.run, args.format, chart if args.format == "table" else None))
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


def upload_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="raylab upload",
                                description="Send the MLflow writes a run kept while its tracking server was away "
                                            "(the raylab-pending-*.json file it named) to the server.")
    p.add_argument("file", type=Path, help="the raylab-pending-*.json file")
    p.add_argument("--tracking-uri", default=None, help="default: the URI the run used, as saved in the file")
    args = p.parse_args(argv)
    try:
        from raylab.tracking import Tracker

        if not args.file.is_file():
            raise UserError(f"{args.file} does not exist; give the raylab-pending-*.json file the run printed.")
        uri = args.tracking_uri or json.loads(args.file.read_text())["tracking_uri"]
        sent = Tracker(uri).upload(args.file)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"raylab: sent {sent} write(s) to {uri}")
    args.file.rename(args.file.with_suffix(".sent"))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from raylab.floor import floor_main

    commands = {"compare": compare_main, "upload": upload_main, "floor": floor_main}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print("usage: raylab compare --experiment NAME [--run ID] [--format table|csv|json]\n"
              "       raylab upload raylab-pending-XXXX.json   (writes kept while the MLflow server was away)\n"
              "       raylab floor [--rounds N]   (measure this machine's start-up floor; trials record it)\n\n"
              "Run trials with a recipe: python recipes/fashion.py --help", file=sys.stderr if argv else sys.stdout)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return commands[argv[0]](argv[1:])
