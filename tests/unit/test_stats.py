"""The measurement protocol's arithmetic: repeats folded, significance, parity, scaling, overhead, time to target."""

from __future__ import annotations

import pytest

from raylab.config import Settings, TrialSpec
from raylab.compare import parity, ranking, stats
from raylab.record import figures
from raylab.driver.matrix import schedule


def row(trial, sps, status="FINISHED", **extra):
    kind, workers = trial.split(" x")
    workers = workers.split()[0]
    fw, st = kind.split(":")
    base = {
        "trial": trial,
        "framework": fw,
        "strategy": st,
        "workers": int(workers),
        "status": status,
        "samples_per_sec": sps if status == "FINISHED" else None,
        "wall_s": 10.0,
        "parameters": "101770",
        "lr": "0.0005",
        "threads": "1",
        "data": "fashion-mnist",
        "global_batch": str(32 * int(workers)),
    }
    return {**base, **extra}


def test_repeats_fold_to_median_and_range_and_count_failures():
    rows = [
        row("tf:none x1", 100.0),
        row("tf:none x1", 300.0),
        row("tf:none x1", 200.0),
        row("torch:none x1", 50.0),
        row("torch:none x1", None, status="FAILED", error="boom"),
    ]
    tf, torch = stats.fold(rows)
    assert (tf["samples_per_sec"], tf["sps_min"], tf["sps_max"], tf["runs"], tf["status"]) == (
        200.0,
        100.0,
        300.0,
        3,
        "FINISHED",
    )
    assert (torch["samples_per_sec"], torch["finished"], torch["status"], torch["error"]) == (
        50.0,
        1,
        "1/2-finished",
        "boom",
    )


def test_differences_are_welch_intervals_on_the_repeats():
    """A 1.12x lead over 3+3 repeats whose 95% interval holds 1 is not distinguishable; 2.00x is, with its interval
    (scipy's t for Welch's 3.54 degrees gives 0.93x..1.35x: the table's 3 degrees, a little wider, never narrower;
    at 4 degrees, 1.63x..2.46x, scipy's to 2 decimals)."""
    rows = (
        [row("a:x x1", v, time_to_target_s=t) for v, t in ((100, 10), (110, 11), (120, 12))]
        + [row("b:x x1", v, time_to_target_s=t) for v, t in ((115, 14), (125, 15), (130, 16))]
        + [row("c:x x1", v) for v in (50, 55, 60)]
    )
    lines = stats.significance(stats.fold(rows)) + ranking.answer(stats.fold(rows))
    assert lines == [
        "b:x x1 vs a:x x1: not distinguishable at 3+3 repeats (1.12x the samples/s, 95% CI 0.92x..1.38x, "
        "Welch's t on log samples/s; add repeats (--repeats) to tell them apart)",
        "a:x x1 vs c:x x1: 2.00x the samples/s (95% CI 1.63x..2.46x, Welch's t on log samples/s; 3+3 repeats)",
        "fastest to target: a:x x1, 11.0 s (reached in 3 of 3 repeat(s)); 1.37x sooner than b:x x1, 15.0 s "
        "(95% CI 1.11x..1.68x, Welch's t on log seconds)",
    ]
    assert stats.welch_ratio([2.0], [1.0, 1.0]) is None and stats.welch_ratio([1.0, 1.0], [1.0, 1.0]) == (1, 1, 1)


def test_single_runs_make_no_significance_claim():
    assert stats.significance(stats.fold([row("a:x x1", 100), row("b:x x1", 50)])) == []


def test_parity_flags_what_differs_and_passes_weak_scaling_batches():
    rows = [row("tf:none x1", 1), row("torch:none x1", 1, parameters="101771"), row("torch:ddp x2", 1)]
    lines, mismatches = parity.parity(rows)
    assert mismatches == ["parameters"]
    assert any(line.startswith("  ! parameters:") and "torch:none x1 101771" in line for line in lines)
    assert "    global batch at x2: 64" in lines  # x1 and x2 differ by design (batch per replica is fixed)
    _, mismatches = parity.parity([row("tf:none x1", 1), row("torch:none x1", 1, global_batch="64")])
    assert mismatches == ["global batch at x1"]
    _, mismatches = parity.parity([row("tf:ps x2", 1, oversubscribed=True)])
    assert mismatches == ["oversubscribed"]


def test_parity_names_a_shuffle_that_differs():
    """A streamed trial whose shuffle window could not hold its split did not train on the same order of data as
    one shuffled over the whole split (in memory: "global"): unfair, and said."""
    window = "window 2,621 rows, files in a new seeded order every pass"
    lines, mismatches = parity.parity([row("tf:none x1", 1, shuffle="global"), row("torch:none x1", 1, shuffle=window)])
    assert mismatches == ["shuffle"]
    assert f"  ! shuffle: tf:none x1 global, torch:none x1 {window}" in lines
    lines, mismatches = parity.parity(
        [row("tf:none x1", 1, shuffle="global"), row("torch:none x1", 1, shuffle="global")]
    )
    assert mismatches == [] and "    shuffle: global" in lines


def test_parity_compares_what_each_worker_built():
    """Two trials that declared the same task but built different optimizers (Keras' and torch's default
    Adam epsilon) are unfair; the same built optimizer is fair."""
    tf_adam, torch_adam = (
        "adam(beta_1=0.9, beta_2=0.999, epsilon=1e-07)",
        "adam(beta_1=0.9, beta_2=0.999, epsilon=1e-08)",
    )
    lines, mismatches = parity.parity(
        [row("tf:none x1", 1, built_optimizer=tf_adam), row("torch:none x1", 1, built_optimizer=torch_adam)]
    )
    assert mismatches == ["optimizer as built"]
    assert any("torch:none x1 adam(beta_1=0.9, beta_2=0.999, epsilon=1e-08)" in line for line in lines)
    _, mismatches = parity.parity(
        [
            row("tf:none x1", 1, built_optimizer=tf_adam, built_lr_schedule="0%=0.001"),
            row("torch:none x1", 1, built_optimizer=tf_adam, built_lr_schedule="0%=0.0005"),
        ]
    )
    assert mismatches == ["learning rate as built at x1"]


def test_parity_compares_global_batches_within_each_swept_size():
    rows = [
        row("tf:none x1 b32", 1, batch_per_replica="32", global_batch="32"),
        row("torch:none x1 b256", 1, batch_per_replica="256", global_batch="256"),
    ]
    lines, mismatches = parity.parity([{**r, "trial": r["trial"]} for r in rows])
    assert mismatches == [] and "    global batch at x1 b256: 256" in lines


def test_scaling_efficiency_per_kind():
    rows = [row("tf:mwms x1", 100.0), row("tf:mwms x2", 150.0), row("torch:ddp x2", 99.0)]
    assert stats.scaling(stats.fold(rows)) == ["tf:mwms: x1 100 samples/s; x2 1.50x (efficiency 0.75)"]


def test_overhead_against_plain_with_targets():
    rows = [
        row("tf:plain x1", 1000.0, wall_s=10.0),
        row("tf:none x1", 980.0, wall_s=10.4),
        row("tf:mirrored x1", 900.0, wall_s=20.0),
        row("torch:plain x1", 1000.0, wall_s=10.0),
        row("torch:none x1", 900.0, wall_s=10.0),
    ]
    lines = stats.overhead(stats.fold(rows))
    assert lines[0].startswith("tf:none x1 vs tf:plain x1: samples/s 0.980x, whole-job wall 1.04x") and lines[
        0
    ].endswith(": met")
    assert "targets" not in lines[1]  # tf:mirrored is not what the plain script mirrors
    assert lines[2].endswith("NOT met")


def test_time_to_target_is_the_first_epoch_at_or_above_it():
    epochs = [
        {"val_accuracy": 0.80, "elapsed_s": 10.0},
        {"val_accuracy": 0.86, "elapsed_s": 20.0},
        {"val_accuracy": 0.84, "elapsed_s": 30.0},
        {"val_accuracy": 0.90, "elapsed_s": 40.0},
    ]
    assert figures.time_to_target(epochs, 0.85) == 20.0
    assert figures.time_to_target(epochs, 0.95) is None
    assert figures.time_to_target(epochs, None) is None


def test_repeats_interleave_and_alternate_order():
    a, b = TrialSpec("tf", "none", 1), TrialSpec("torch", "none", 1)
    cfg = Settings(trials=[a, b], epochs=1, threads=1, seed=0, quick=True, tracking_uri="x", experiment="e", repeats=3)
    p = TrialSpec("tf", "plain", 1)
    assert schedule(cfg, [p]) == [(1, a), (1, b), (1, p), (2, p), (2, b), (2, a), (3, a), (3, b), (3, p)]


def test_restarted_trials_are_marked_with_their_cost_summed_over_repeats():
    from raylab.compare.table import format_table

    rows = [
        row("torch:ddp x2", 100.0, restarts=1.0, recovery_s=20.0, lost_s=0.0),
        row("torch:ddp x2", 110.0),
        row("tf:none x1", 90.0),
    ]
    folded = stats.fold(rows)
    assert (folded[0]["restarts"], folded[0]["recovery_s"], folded[1]["restarts"]) == (1.0, 20.0, None)
    table = format_table(folded)
    assert "torch:ddp x2 +" in table and "tf:none x1 +" not in table
    assert "+ restarted from a checkpoint 1x (torch:ddp x2): 20.0 s to recover, 0.0 s of training done again" in table
    assert "+" not in format_table([{**folded[0], "restarts": None, "recovery_s": None, "lost_s": None}])


def test_parity_flags_compiled_against_not_compiled_with_the_fix():
    eager = [
        row("torch:none x1", 100, execution="eager", compiled="False"),
        row("jax:none x1", 300, execution="jit", compiled="True"),
    ]
    lines, mismatches = parity.parity(eager)
    assert mismatches == ["execution"]
    assert (
        "  ! execution (compiled against not): eager: torch:none x1; jit: jax:none x1; run them all compiled "
        "with --compile on (or both ways with --compile off,on)" in lines
    )
    compiled = [
        row("torch:none x1 inductor", 100, execution="inductor", compiled="True"),
        row("jax:none x1", 300, execution="jit", compiled="True"),
    ]
    lines, mismatches = parity.parity(compiled)
    assert mismatches == [] and "    execution (compiled): inductor: torch:none x1 inductor; jit: jax:none x1" in lines


def test_parity_treats_compile_off_on_as_an_axis():
    swept = [
        row("torch:none x1", 100, execution="eager", compiled="False", requested_strategy="none"),
        row("torch:none x1 inductor", 110, execution="inductor", compiled="True", requested_strategy="none"),
        row("jax:none x1", 300, execution="jit", compiled="True", requested_strategy="none"),
    ]
    lines, mismatches = parity.parity(swept)
    assert mismatches == [] and any(
        line.startswith("    execution (swept: compare compiled with compiled)") for line in lines
    )


def test_parity_compares_each_frameworks_count_of_the_work_per_sample():
    """Counts within 2% are one model's (the counters' conventions may differ a little); further apart, the models
    differ or a counter misses an op, and each trial's count is named."""
    lines, mismatches = parity.parity(
        [
            row("tf:none x1", 1, flops_per_sample=410_004.4),
            row("torch:none x1", 1, flops_per_sample=409_088.0),
            row("tf:plain x1", 1),
        ]
    )
    assert mismatches == []
    assert "    work per sample (forward and gradients, each framework's own counter): 409.1 kFLOP..410 kFLOP" in lines
    lines, mismatches = parity.parity(
        [row("jax:none x1", 1, flops_per_sample=409_088.0), row("torch:none x1", 1, flops_per_sample=492_770_304.0)]
    )
    assert mismatches == ["work per sample"]
    assert any(
        line.startswith("  ! work per sample") and "jax:none x1 409.1 kFLOP, torch:none x1 492.8 MFLOP" in line
        for line in lines
    )
    lines, mismatches = parity.parity(
        [row("jax:none x1", 1, flops_per_sample=409_088.0), row("torch:none x1", 1, flops_per_sample=409_088.0 * 1.03)]
    )
    assert mismatches == ["work per sample"]  # 3% apart: not one model


def test_a_count_of_zero_or_none_is_not_counted_and_says_why():
    """0 is never a count: a trial without one is named with its reason (the worker's, a kind that counts
    nothing, or a 0 recorded by an older raylab), and the others' counts are still compared."""
    lines, mismatches = parity.parity(
        [
            row("jax:none x1", 1, flops_per_sample=409_088.0, flops_count="forward and gradients"),
            row(
                "tf:none x1",
                1,
                flops_count="not counted: the framework's counter found no matrix product or "
                "convolution it counts in the step",
            ),
            row("torch:none x1", 1, flops_per_sample=0.0),
            row("torch:ps-sync x2", 1),
            row("tf:plain x1", 1),
        ]
    )
    assert mismatches == []
    assert (
        "  ? work per sample not counted, so not shown alike: tf:none x1 (the framework's counter found no "
        "matrix product or convolution it counts in the step); torch:none x1 (the counter found nothing it "
        "counts (0 recorded)); torch:ps-sync x2 (its kind records no count)"
    ) in lines
    assert "    work per sample (forward and gradients, each framework's own counter): 409.1 kFLOP" in lines
    lines, _ = parity.parity(
        [row("tf:none x1", 1, flops_count="not counted: a streamed trial's test split is read in batches")]
    )
    assert "    work per sample: not counted (a streamed trial's test split is read in batches)" in lines
    assert not any("work per sample" in line for line in parity.parity([row("tf:none x1", 1)])[0])


def test_the_answer_compares_like_starts_and_counts_a_missed_target_as_a_miss():
    """Cold and warm repeats apart: every trial has both, so the answer is read from the kind with more repeats
    (warm, here: 2 or more each), and said so; a trial that reached the target once in three is ranked after one that
    reached it every time, however fast that once; no crash where a trial's cold runs all missed."""
    a = [
        row("a:x x1", 100, start=s, startup_s=u, time_to_target_s=t)
        for s, u, t in (("cold", 10, 30), ("warm", 1, 20), ("warm", 1, 21), ("warm", 1, 22))
    ]
    b = [
        row("b:x x1", 100, start=s, startup_s=u, time_to_target_s=t)
        for s, u, t in (("cold", 10, None), ("warm", 1, 5), ("warm", 1, None), ("warm", 1, None))
    ]
    (line,) = ranking.best_to_target(
        stats.fold(a + b), "time_to_target_s", ("fastest", "sooner", "seconds"), "{:.1f} s".format
    )
    assert line.startswith(
        "fastest to target (warm starts): a:x x1, 21.0 s (reached in 3 of 3 repeat(s)); next "
        "b:x x1, 5.0 s, reached in 1 of 3 (no interval"
    ), line
    # a kind that always starts cold against one in a warm group: nothing in common, start-up taken out
    c = [row("c:x x1", 100, start="cold", startup_s=12, time_to_target_s=t) for t in (40, 42)]
    d = [row("d:x x1", 100, start="warm", startup_s=1, time_to_target_s=t) for t in (30, 31)]
    (line,) = ranking.answer(stats.fold(c + d))
    # (d's 30.5 s against c's 41 s with start-ups in: c's 12 s cold start was most of that)
    assert line.startswith(
        "fastest to target (start-up taken out: cold and warm repeats compared alike): c:x x1, 29.0 s "
        "(reached in 2 of 2 repeat(s)); not distinguishable from d:x x1, 29.5 s"
    ), line
    # only cold runs: said by nothing, as before
    assert ranking.basis(stats.fold(c)) == ("cold", "")
    # start-up taken out: a repeat without its start-up is left out, not counted as a miss
    e = [row("e:x x1", 100, start="warm", startup_s=None, time_to_target_s=30)]
    assert ranking.reached(stats.fold(c + e)[1], "time_to_target_s", None) == ([], 0)


def test_repeats_that_do_not_vary_are_no_certainty():
    """Zero variance: no interval is claimed, and the line asks for repeats."""
    rows = [row("a:x x1", 100, time_to_target_s=10) for _ in range(2)] + [
        row("b:x x1", 50, time_to_target_s=20) for _ in range(2)
    ]
    lines = stats.significance(stats.fold(rows)) + ranking.answer(stats.fold(rows))
    assert lines == [
        "a:x x1 vs b:x x1: 2.00x the samples/s (no spread in 2+2 repeats: no interval to show; add repeats "
        "(--repeats) to measure the noise; 2+2 repeats)",
        "fastest to target: a:x x1, 10.0 s (reached in 2 of 2 repeat(s)); 2.00x sooner than b:x x1, 20.0 s (no "
        "spread in 2+2 repeats: no interval to show; add repeats (--repeats) to measure the noise)",
    ]


def test_the_parity_reports_names_moved_with_a_warning():
    with pytest.warns(DeprecationWarning, match=r"raylab.compare.stats.parity moved to raylab.compare.parity.parity"):
        assert stats.parity is parity.parity


def test_a_trial_too_short_to_time_is_marked_in_the_table_and_the_parity_report():
    """A samples/s over 0.3 s of steady steps is no figure to compare (issue 71: one pause moved such a trial from
    1.12x to 0.76x of its plain loop): the table shows each trial's steady seconds, the short one marked, and the
    parity report says so without calling the comparison unfair; a trial over the floor is shown as before."""
    from raylab.compare import table
    from raylab.timing import summarize_windows

    assert summarize_windows([(0.1, 32), (0.2, 32)], 32)["steady_s"] == pytest.approx(0.3)
    rows = [row("tf:none x1", 100, steady_s=0.3), row("torch:none x1", 90, steady_s=12.0)]
    report = table.format_report(rows)
    header, _, tf, torch_line = report.splitlines()[:4]
    assert header.split()[-2:] == ["steady", "s"] and tf.endswith("0.3 ~") and torch_line.endswith("12.0")
    assert "~ too short to time: under 5 s of steady steps" in report
    assert (
        "  ? too short to time (under 5 s of steady steps, samples/s is not a figure to compare): tf:none x1 0.3 s"
        in report
        and "parity: fair" in report
    )
    assert "steady s" not in table.format_report([row("tf:none x1", 100, steady_s=6.0)])
    # a trial whose repeats partly failed is still marked on the ones that finished
    partly = table.format_report([row("a:x x1", 100, steady_s=0.4), row("a:x x1", None, status="FAILED")])
    assert "? too short to time" in partly and "0.4 ~" in partly


def test_the_answer_by_samples_per_sec_ranks_only_what_the_verdict_supports():
    """Fastest first, each other as a share of it; a figure too short to time, one measured beside other work and a
    failed trial are named with why, not ranked; settings that differ rank nothing; with --seconds the answer to
    the target says which trials it ended before the target."""
    from raylab.compare.ranking import by_speed

    rows = [
        row("tf:none x1", 50000.0, steady_s=6.0, beside_cores=0.02, beside_s=6.0),
        row("jax:none x1", 80000.0, steady_s=5.5, beside_cores=0.0, beside_s=5.5),
        row("torch:none x1", 90000.0, steady_s=2.0),  # the fastest figure, but too short to time
        row("xla:single x1", 40000.0, steady_s=7.0, beside_cores=0.9, beside_s=7.0),  # beside a burner
        row("torch:ddp x2", None, status="FAILED"),
    ]
    lines, mismatches = parity.parity(rows)
    assert mismatches == ["measured beside other work"], lines
    ranked = by_speed(stats.fold(rows), mismatches)
    assert ranked[0] == (
        "fastest: jax:none x1, 80,000 samples/s; then tf:none x1 0.62x (one run each: a gap of a "
        "few percent may be this machine's noise; --repeats 3 tests it)"
    ), ranked
    assert ranked[1] == (
        "not ranked: torch:none x1 (too short to time: 2.0 s of steady steps), xla:single x1 (beside "
        "0.90 cores of other work), torch:ddp x2 (failed)"
    ), ranked
    assert by_speed(stats.fold(rows), ["seed", "measured beside other work"]) == [
        "none ranked: the trials differ in seed (the parity report above says how)"
    ]
    assert by_speed(stats.fold(rows[:1]), []) == []  # one trial: nothing to rank

    timed = [
        row("jax:none x1", 80000.0, seconds="5.0", time_to_target_s=10.0),
        row("xla:single x1", 4000.0, seconds="5.0", time_to_target_s=None),
    ]
    assert (
        ranking.answer(stats.fold(timed))[-1]
        == "ended by --seconds before the target: xla:single x1 (not ranked on it)"
    )
