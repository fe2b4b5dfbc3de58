"""The mutants (tests/mutants.py), row by row of docs/testing.md's capability table: each breaks its row's feature at
one line, and names the default-tier test of that row that must then fail. Groups: "quick" (unit and door tests,
seconds each), "trials" (a trial or an invocation, about a minute each), "matrix" (the fashion matrix, 6 minutes
each) and "walk" (the walk-through's job, 3 minutes each)."""

from __future__ import annotations

UNIT, INTEG, E2E = "tests/unit/", "tests/integration/", "tests/e2e/"


def define(mutant) -> None:
    quick(mutant)
    trials(mutant)
    heavy(mutant)


def quick(m) -> None:
    m(
        "door-seconds-flag",
        "every command the README and docs pages show passes raylab's door",
        "raylab/cli/recipe_flags.py",
        '        "--seconds",\n        type=float,',
        '        "--secs",\n        type=float,',
        E2E + "test_docs_commands.py",
    )
    m(
        "tpu-refusal",
        "`tf:tpu` refused where there is no TPU, before any worker starts",
        "raylab/frameworks/tf/kinds.py",
        'if why and cfg.tpu_fallback != "mirrored":',
        'if why and cfg.tpu_fallback == "mirrored":',
        INTEG + "test_tpu.py",
    )
    m(
        "race-picks-fastest",
        "`--compile best`: the race before the trials",
        "raylab/probes/choice.py",
        "fastest = min(timed, key=lambda label: self.projected(label, steps))",
        "fastest = max(timed, key=lambda label: self.projected(label, steps))",
        UNIT + "test_race.py",
    )
    m(
        "cast-keeps-ints",
        "a transformer in torch, TF and JAX, fair; integer inputs kept integer (`Cast`): in memory, the object store, "
        "streamed `.npy` and Parquet",
        "raylab/task/preprocess.py",
        "        return np.asarray(x).astype(self.dtype_of(None), copy=False)",
        "        return np.asarray(x).astype(np.float32, copy=False)",
        UNIT + "test_task.py",
    )
    m(
        "tf-einsum-count",
        "work per sample by each framework's counter, GFLOP/s",
        "raylab/frameworks/tf/flops.py",
        "    return 2 * math.prod(sizes.values())",
        "    return 0",
        UNIT + "test_flops.py",
    )
    m(
        "activations-gelu-form",
        "model settings compared (normalization, dropout, initial spreads, activations)",
        "raylab/frameworks/jax/layers.py",
        'found["gelu (tanh)" if _cubed(eqn, made) else "tanh"] += 1',
        'found["tanh"] += 1',
        UNIT + "test_model_settings.py",
    )
    m(
        "unfair-model-settings",
        "model settings compared (normalization, dropout, initial spreads, activations)",
        "raylab/compare/parity.py",
        '        mismatches.append("model settings")\n',
        "        pass\n",
        UNIT + "test_model_settings.py",
    )
    m(
        "utilization-per-replica",
        "utilization against `raylab peak`'s measured peak",
        "raylab/probes/utilization.py",
        '"utilization": achieved_tflops / (peak * max(replicas, 1))',
        '"utilization": achieved_tflops / peak',
        UNIT + "test_peak.py",
    )
    m(
        "profile-summary",
        "profiling (`--profile`), a Native metric",
        "raylab/frameworks/torch/profile.py",
        'f"self_{device}_time_total"',
        'f"self_{device}_time"',
        UNIT + "test_profile.py",
    )
    m(
        "npy-shuffle-global",
        "streamed Parquet (`raylab data export`, `--data`) and `.npy` shards",
        "raylab/data/shuffle.py",
        "    if window >= pass_rows:\n",
        "    if window > pass_rows:\n",
        UNIT + "test_shuffle.py",
    )
    m(
        "compare-csv",
        "`raylab compare`: table, CSV and JSON",
        "raylab/compare/table.py",
        'writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["trial"])',
        'writer = csv.DictWriter(out, fieldnames=list(rows[0])[1:] if rows else ["trial"], extrasaction="ignore")',
        UNIT + "test_compare.py",
    )
    m(
        "batch-max-bisect",
        "`--batch max`",
        "raylab/probes/batchsize.py",
        "    while hi - lo > 1:\n",
        "    while hi - lo > 2:\n",
        UNIT + "test_batchsize.py",
    )
    m(
        "own-error-restarted",
        "a trial's own error fails it at once, unrestarted, named; the next trial runs",
        "raylab/driver/policy.py",
        "        if code and not lost:\n",
        "        if code and lost:\n",
        UNIT + "test_failure.py",
    )
    m(
        "bf16-fallback",
        "bf16, and its recorded fallback",
        "raylab/settings/resolve.py",
        '        if cfg.precision_fallback != "fp32":\n',
        "        if False:\n",
        UNIT + "test_precision.py",
    )
    m(
        "unknown-node-type",
        "two node types in one invocation, priced, fastest and cheapest to the target; an unknown type refused",
        "raylab/driver/resources.py",
        "    if cfg.accelerator_type and ACCELERATOR + cfg.accelerator_type not in total:\n",
        "    if False:\n",
        INTEG + "test_trials.py",
    )
    m(
        "more-workers-than-cpus",
        "clear errors before training",
        "raylab/driver/resources.py",
        '    if (layout.cpus > total.get("CPU", 0) and not oversubscribed) or cpus <= 0:\n',
        "    if cpus <= 0:\n",
        INTEG + "test_trials.py",
    )
    m(
        "pin-every-thread",
        "`--pin-cpus`",
        "raylab/settings/pinning.py",
        "        return 0\n    for tid in tids:\n",
        "        return 0\n    for tid in tids[:1]:\n",
        UNIT + "test_pinning.py",
    )
    m(
        "store-identity",
        "`raylab probes`",
        "raylab/probes/store.py",
        "        identity is None or entry.get(",
        "        True or entry.get(",
        UNIT + "test_store.py",
    )
    m(
        "seconds-stop",
        "`--seconds`",
        "raylab/loop/epochs.py",
        "return self.cfg.seconds is not None and self.chrono.steady_s() >= self.cfg.seconds",
        "return self.cfg.seconds is not None and self.chrono.steady_s() >= 2 * self.cfg.seconds",
        UNIT + "test_loop.py",
    )
    m(
        "compare-own-user",
        "`raylab compare` on a store two users write to",
        "raylab/compare/runs.py",
        'mine = [r for r in runs if r.data.tags.get(tracking.USER) in (who, None, "unknown")]',
        "mine = runs",
        UNIT + "test_compare.py",
    )
    m(
        "plain-window",
        "`--plain` scripts read back once a window",
        "raylab/frameworks/torch/plain.py",
        'for k in windows(steps, spec["window"], chrono.warmup, done):',
        'for k in windows(steps, spec["window"] // 2, chrono.warmup, done):',
        INTEG + "test_plain.py",
    )
    m(
        "beside-starting-worker",
        "two jobs on one `ray start` cluster",
        "raylab/loop/beside.py",
        'if not (cmdline.startswith(b"ray::") or any(mark in cmdline for mark in STARTING_WORKER)):',
        'if not cmdline.startswith(b"ray::"):',
        UNIT + "test_beside.py",
    )
    m(
        "plain-beside-unread",
        "`--plain` scripts read back once a window; their steady seconds and what ran beside them recorded",
        "raylab/frameworks/plain.py",
        'print(json.dumps({**result, **last, **({"beside_read": read} if read else {})}))',
        "print(json.dumps({**result, **last}))",
        INTEG + "test_plain.py",
    )


def trials(m) -> None:
    m(
        "warm-group-cold",
        "a warm worker group (repeats of a kind in one group's processes)",
        "raylab/driver/sharing.py",
        '    if cfg.fresh_processes:\n        return "--fresh-processes"\n',
        '    if True:\n        return "--fresh-processes"\n',
        E2E + "test_resume.py",
        "trials",
    )
    m(
        "held-restart-raises",
        "a worker killed at a held point, the trial restarted from its checkpoint",
        "raylab/driver/policy.py",
        "            decision = super().make_decision(training_failed_error)\n",
        "            decision = FailureDecision.RAISE\n",
        INTEG + "test_held_restart.py",
        "trials",
    )
    m(
        "resume-reruns-finished",
        "the driver SIGKILLed mid-trial, then `--resume last`",
        "raylab/driver/invocation.py",
        '        if run.info.status == "FINISHED":\n',
        "        if False:\n",
        E2E + "test_resume.py",
        "trials",
    )
    m(
        "sigterm-not-taken",
        "SIGTERM (as `ray job stop` sends) leaves runs KILLED and nothing running",
        "raylab/runtime/stopping.py",
        "STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)",
        "STOPS = (signal.SIGHUP, signal.SIGINT)",
        E2E + "test_interrupt.py",
        "trials",
    )
    m(
        "npy-trial-shuffle",
        "streamed Parquet (`raylab data export`, `--data`) and `.npy` shards",
        "raylab/data/shuffle.py",
        '        return "global"\n',
        '        return "whole"\n',
        INTEG + "test_streamed_npy.py",
        "trials",
    )
    m(
        "image-folder-listing",
        "image folders",
        "raylab/data/image_folders.py",
        "files = sorted(e.path for e in os.scandir(Path(folder) / c) if e.name.lower().endswith(IMAGE_SUFFIXES))",
        "files = sorted(e.path for e in os.scandir(Path(folder) / c) if e.name.lower().endswith(IMAGE_SUFFIXES))[1:]",
        INTEG + "test_image_folder.py",
        "trials",
    )
    m(
        "fp16-skips-uncounted",
        "fp16 with loss scaling, a replica's non-finite step skipped by all",
        "raylab/frameworks/torch/loss_scale.py",
        "        self.skipped += sum(self.scaler._found_inf_per_device(self.optimizer).values())\n",
        "",
        INTEG + "test_fp16.py",
        "trials",
    )
    m(
        "oom-unnamed",
        "out of host memory, named, unrestarted",
        "raylab/failure.py",
        "    if memory:\n        peak = ",
        "    if False:\n        peak = ",
        INTEG + "test_out_of_memory.py",
        "trials",
    )
    m(
        "gpu-script-cell",
        "bench/gpu.sh, the GPU acceptance run, passes the door in both forms",
        "bench/gpu.sh",
        "fashion_cnn.py --trials torch:none --batch max",
        "fashion_cnn.py --trials torch:none --batch maxx",
        E2E + "test_gpu_script.py",
        "trials",
    )
    m(
        "two-jobs-no-hold",
        "two jobs on one `ray start` cluster",
        "raylab/driver/hold.py",
        "    for node in sorted(node_ids):\n        hold.actors.append(_take_one(node, who, log, began))\n",
        "    for node in []:\n        hold.actors.append(_take_one(node, who, log, began))\n",
        E2E + "test_two_jobs.py",
        "trials",
    )
    m(
        "outage-kept-writes",
        "the MLflow server away mid-trial: nothing lost",
        "raylab/record/tracking.py",
        "                self.pending.pop(0)\n                sent += 1\n",
        "                self.pending.clear()\n                sent += 1\n                break\n",
        E2E + "test_tracking_outage.py",
        "trials",
    )
    m(
        "listeners-unnamed",
        "what listens on the network",
        "docs/clusters.md",
        "| `raylet` | the node manager",
        "| `rayletd` | the node manager",
        E2E + "test_interrupt.py",
        "trials",
    )


def heavy(m) -> None:
    m(
        "kinds-replicas-agree",
        "every trial kind trains and records what ran",
        "raylab/record/figures.py",
        '    same = "n/a" if len(sums) < 2 else',
        '    same = "n/a" if len(sums) < 3 else',
        INTEG + "test_matrix.py",
        "matrix",
    )
    m(
        "work-per-sample",
        "work per sample by each framework's counter, GFLOP/s",
        "raylab/loop/work.py",
        '"flops_per_sample": step / num_items(x),',
        '"flops_per_sample": step / num_items(x) / 2,',
        E2E + "test_walkthrough.py",
        "walk",
    )
    m(
        "job-joins-cluster",
        "`ray job submit` as docs/clusters.md writes it",
        "raylab/runtime/cluster.py",
        'address=address or "local",',
        'address="local",',
        E2E + "test_walkthrough.py",
        "walk",
    )
    m(
        "ui-raylab-charts",
        "the MLflow UI in a browser, opened on the latest invocation's trials and raylab's charts",
        "raylab/record/ui_view.py",
        '"compareRunCharts": charts,',
        '"compareRunCharts": [],',
        E2E + "test_walkthrough.py",
        "walk",
    )
    m(
        "unfair-verdict",
        "the parity verdict UNFAIR, naming what differs and the flag that aligns it",
        "raylab/compare/table.py",
        """    verdict = "fair" if not mismatches else f"UNFAIR ({', '.join(mismatches)} differ)"\n""",
        '    verdict = "fair"\n',
        INTEG + "test_matrix.py",
        "matrix",
    )
