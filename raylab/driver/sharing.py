"""Which trials share a warm worker group (raylab/driver/groups.py), and which stay cold.

Trials share a group with the same `group_key` (framework, worker processes and what each reserves, threads,
device, backend, start-up environment). Trials of two kinds share where their processes are set up alike: a
1-worker tf:none and tf:mirrored always; torch:none with a 1-worker torch:ddp and jax:none with a 1-worker jax:dp
where the invocation has both (`setup_of`: the group's processes get the distributed kind's set-up, a process
group or jax.distributed world of one, which the other kind's steps do not use; recorded as `group_setup`).
Which stay cold, and why (`cold_reason`): a kind whose framework fixes its set-up for a process's life
(Strategy.cold: TF's multi-worker collectives, the parameter servers, torch_xla's cache, a TPU system), a streamed
trial (its splits are given to its own `fit()`), a memory cap (`--memory-cap-mb` limits what a process has mapped,
and a warm process still maps its earlier trials' heap), `--compile-cache cold` on a compiled trial (an empty cache
is a new process's), `--fresh-processes`, trials run at once (`--concurrency`) or a cluster of several nodes (a
group holds its workers' places).
"""

from __future__ import annotations


def group_key(cfg, spec, trials=()) -> tuple:
    """Trials with the same key can share a warm group's processes: their framework, and the processes as the
    group's set-up (`setup_of`) starts them. trials: the invocation's (TrialSpecs), which decide the set-up."""
    from raylab.driver.trainer import backend_config, worker_env

    setup = setup_of(spec, trials)
    strategy = setup.strategy
    layout = setup.layout(cfg)
    backend = backend_config(strategy, cfg)
    env = tuple(sorted(worker_env(strategy, backend, cfg).items()))
    backend_key = (type(backend).__qualname__, repr(sorted(vars(backend).items())))
    # A probe (--batch max) has no restart budget and the trial has one: each its own group.
    return (
        strategy.framework,
        layout,
        cfg.threads,
        strategy.device(cfg),
        cfg.accelerator_type,
        backend_key,
        env,
        cfg.max_failures,
        cfg.storage,
    )


def setup_of(spec, trials=()):
    """The trial whose set-up a group's processes get (its backend, its start environment): the trial's own, or,
    for a 1-worker trial whose kind may run in another kind's processes (`Strategy.warm_with`: torch:none in a
    1-rank process group it does not use, jax:none in a 1-process jax.distributed), that kind's where the
    invocation has a 1-worker trial of it, so the two kinds share one group. Kinds whose set-ups are the same
    (tf:none, tf:mirrored x1) share without it: their keys are equal."""
    from dataclasses import replace

    host = spec.strategy.warm_with
    if host and spec.workers == 1 and any(t.kind == host and t.workers == 1 for t in trials):
        return replace(spec, short=host.split(":")[1])
    return spec


def cold_reason(cfg, spec, one_node: bool, limit: int) -> str | None:
    """Why a trial gets worker processes of its own, or None: it can run in a warm group."""

    strategy = spec.strategy
    if cfg.fresh_processes:
        return "--fresh-processes"
    if strategy.cold:
        return f"{spec.kind}: {strategy.cold}"
    if cfg.streamed:
        return "a streamed trial's splits are given to a Ray Train run of its own"
    if cfg.memory_cap_mb:
        # Measured: fashion_cnn's --batch max edge under 2500 MB was 157 items warm against 177 cold.
        return (
            "--memory-cap-mb: the cap counts what a process has mapped, and a warm process still maps the heap "
            "of the trials before (its edge would be smaller than a new process's)"
        )
    always_compiled = strategy.executions.get("off") == strategy.executions.get("on")  # jax, torch_xla
    if cfg.compile_cache == "cold" and (spec.compiled() or always_compiled):
        return "--compile-cache cold: an empty compile cache is a new process's"
    if limit > 1:
        return "trials run at once (--concurrency): each holds nodes of its own"
    if not one_node:
        return "a cluster of several nodes: a group would hold its workers' places between trials"
    return None
