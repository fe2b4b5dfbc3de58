"""Step benchmarks: one operation (a convolution, a training step) timed per iteration in each framework.

A `StepBench` recipe is, like a training recipe, data-free plus one builder per framework: the
builder sets up its inputs (synthetic, seeded) and returns a function that runs one iteration
and returns only when the work is done. Each trial runs in its own fresh Ray worker process
(a task with the trial's CPUs and threads), first the warm-up iterations (tracing, XLA
compilation), then the timed ones; each trial and repeat is an MLflow child run with the same
names as training trials, so `raylab compare` shows them the same way. Synthetic data only:
no accuracy is claimed.
"""

from __future__ import annotations

import time

from raylab import registry
from raylab.task.recipe import BenchContext, StepBench


def _bench_task(
    bench: StepBench,
    framework: str,
    batch: int,
    iterations: int,
    warmup: int,
    threads: int,
    seed: int,
    precision: str,
    trial_start: float,
    gpu: bool = False,
) -> dict:
    """Runs on a Ray worker (holding a GPU if `gpu`): set threads, build, warm up, time."""
    from raylab.loop.report import builtins_only
    from raylab.loop.worker_config import host_facts
    from raylab.timing import summarize

    t_enter = time.time()
    ctx = BenchContext(framework, batch, threads, seed)
    facts = {"intra_op_threads": threads}
    fw = registry.framework(framework)
    compiles = fw.part("stepbench").set_up(ctx, facts, precision, gpu)  # () -> (compilations, seconds), or None
    run_once, built = bench.builders[fw.models](ctx)
    # The same names as training trials' device_kind: cpu, gpu (TF), cuda (torch), xla:cpu / xla:cuda / xla:tpu.
    kind = facts.pop("device_kind", None) or getattr(ctx.device, "type", ctx.device)
    facts.update(built, precision_applied="bf16" if ctx.bf16 else "fp32", device_kind=kind)
    times, compiled = [], (0, 0.0)
    t_first = time.time()
    for i in range(warmup + iterations):
        t0 = time.perf_counter()
        run_once()
        times.append(time.perf_counter() - t0)
        if compiles is not None and i + 1 == warmup:
            compiled = compiles()
    result = {
        **summarize(times, warmup, batch),
        "first_step_s": times[0],
        "startup_s": t_first - trial_start,
        "startup_workers_s": t_enter - trial_start,
        "iterations": iterations,
    }
    if compiles is not None:
        total = compiles()
        result.update(
            compile_count_warmup=compiled[0],
            compile_time_warmup_s=compiled[1],
            compiles_after_warmup=total[0] - compiled[0],
        )
    return builtins_only({"result": result, "facts": {**facts, **host_facts()}})


def run_bench(bench: StepBench, cfg, tracker, tags: dict) -> tuple[str, list]:
    """Every trial x repeat (interleaved, alternating order) as a Ray task in a fresh process; returns outcomes."""
    from raylab.driver.matrix import schedule
    from raylab.driver.outcome import INTERRUPTS

    sizes = _sizes(bench, cfg)
    parent = tracker.start_run(
        f"{bench.name} {time.strftime('%Y-%m-%d %H:%M:%S')}",
        {
            "recipe": bench.name,
            "trials": ",".join(s.name for s in cfg.trials),
            "repeats": cfg.repeats,
            "quick": cfg.quick,
        },
        tags,
    )
    outcomes, status = [], "FAILED"
    try:
        for repeat, spec in schedule(cfg, []):
            outcomes.append(_run_one(bench, cfg, tracker, tags, parent, repeat, spec, sizes))
        status = "FINISHED" if all(o.status == "FINISHED" for o in outcomes) else "FAILED"
    except INTERRUPTS:
        status = "KILLED"
        raise
    finally:
        tracker.end(parent, status)
    return parent, outcomes


def _sizes(bench: StepBench, cfg) -> tuple[int, int, int]:
    """(batch, timed iterations, warm-up iterations) of every trial: --quick's, or the bench's and the flags'."""
    if cfg.quick:
        return bench.quick_batch, bench.quick_iterations, 1
    return bench.batch, cfg.steps_per_epoch or bench.iterations, bench.warmup


def _run_one(bench: StepBench, cfg, tracker, tags: dict, parent: str, repeat: int, spec, sizes: tuple):
    """One trial x repeat: its child run, its Ray task in a fresh process, what it measured; its outcome."""
    import ray

    from raylab.driver.outcome import TrialOutcome, recorded

    batch, iterations, warmup = sizes
    gpu = cfg.device == "gpu"
    fw = registry.framework(spec.framework)
    params = {
        "recipe": bench.name,
        "trial": spec.kind,
        "framework": spec.framework,
        "strategy": spec.short,
        "requested_strategy": spec.short,
        "workers": 1,
        "global_batch": batch,
        "batch_per_replica": batch,
        "iterations": iterations,
        "warmup_steps": warmup,
        "threads": cfg.threads,
        "seed": cfg.seed,
        "precision": cfg.precision,
        "device": cfg.device,
        "data": "synthetic",
        "data_synthetic": True,
        "quick": cfg.quick,
        "repeat": repeat,
        "oversubscribed": False,
    }
    run_id = tracker.start_run(spec.name, params, tags, parent=parent)
    print(
        f"\n=== {spec.name}: {bench.name}, batch {batch}, {warmup} warm-up + {iterations} timed "
        f"{bench.what}s, {cfg.threads} thread(s) (MLflow run {run_id}) ===",
        flush=True,
    )
    outcome = TrialOutcome(spec, run_id, "FAILED", ran=spec.short, repeat=repeat)
    env = {"OMP_NUM_THREADS": str(cfg.threads), **fw.part("stepbench").env(cfg)}
    start = time.time()
    with recorded(outcome, tracker):
        task = ray.remote(max_calls=1)(_bench_task).options(  # max_calls=1: a fresh process per trial
            num_cpus=cfg.threads, num_gpus=1 if gpu else 0, runtime_env={"env_vars": env}
        )
        out = ray.get(
            task.remote(bench, fw.name, batch, iterations, warmup, cfg.threads, cfg.seed, cfg.precision, start, gpu)
        )
        outcome.result = {**out["result"], "wall_s": time.time() - start}
        tracker.log_metrics(run_id, outcome.result)
        tracker.set_tags(run_id, {**out["facts"], "actual_strategy": spec.short})
        r = outcome.result
        print(
            f"[{spec.name}] {r['step_time_p50_ms']:.1f} ms/{bench.what} (p50; p90 {r['step_time_p90_ms']:.1f}), "
            f"{r['samples_per_sec']:,.1f} items/s, first {r['first_step_s']:.2f} s",
            flush=True,
        )
    return outcome
