"""One place resolves what each trial runs with from what was asked, and refuses, before Ray starts, what cannot run.

The command line's flags are parsed and each value checked on its own in raylab/cli/ (configure.py, expand.py);
what the trials then run with is decided here, from those values, the recipe's data and each trial kind's Strategy
(raylab/registry.py), as Lightning Fabric's connector decides its accelerator, strategy and precision in one place:

    expand_trials(...)   the trial matrix: each kind on the worker counts it takes, in each execution --compile asks
                         that it has on each --device item (its strategy, workers, execution and accelerator)
    check(cfg, ...)      every refusal of the settings together, before Ray starts: a precision a trial cannot apply,
                         --seconds, --plain, --batch max or streamed data where a trial cannot run them; a UserError
                         naming the trial, the setting and the fix
    check_bench(...)     the same for a step benchmark's trials
    trial(cfg, spec)     one trial's accelerator, strategy, precision, execution and threads (`TrialSettings`): what
                         the driver reads, never refusing (check refused before Ray what trial() would resolve)

After Ray starts, only what needs the cluster is checked (raylab/driver/resources.py: CPUs, GPUs, an accelerator
type, a TPU slice, each kind's `Strategy.preflight`), and --compile best fills in the execution of its trials
(raylab/probes/race.py): `trial()` reads it from the spec whenever it is asked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from raylab.config import Settings, TrialSpec
from raylab.errors import UserError
from raylab.registry import Layout, Strategy, get_strategy, kinds
from raylab.settings.precision import why_not


@dataclass(frozen=True)
class TrialSettings:
    """What one trial runs with, resolved from the invocation's Settings and its TrialSpec (`trial`)."""

    strategy: Strategy  # its kind's Strategy (raylab/registry.py)
    layout: Layout  # its processes and replicas under the invocation's threads and parameter servers
    device: str  # what each replica asks Ray for: "cpu" or "gpu" (its --device item)
    accelerator_type: str | None  # the Ray accelerator type its nodes must have, or None
    runs_on: str  # the device its steps run on: "cpu", "gpu" or "tpu" (TPU kinds decide it: Strategy.device)
    precision: str  # what its steps apply: what was asked, or fp32 under --precision-fallback fp32
    precision_fallback_reason: str | None  # why it runs fp32 instead of what was asked, or None
    execution: str  # how its steps run ("eager", "inductor", "jit", ...): TrialSpec.executes
    threads: int  # intra-op threads per replica


def trial(cfg: Settings, spec: TrialSpec) -> TrialSettings:
    """One trial's settings, from the invocation's (on its own --device item) and its spec. A precision it cannot
    apply resolves to fp32 with the reason: check() refused it before Ray unless --precision-fallback fp32 asked."""
    on = cfg.on(spec)
    strategy = spec.strategy
    runs_on = strategy.device(on)
    reason = why_not(spec.kind, cfg.precision, runs_on)
    return TrialSettings(
        strategy=strategy,
        layout=spec.layout(cfg),
        device=on.device,
        accelerator_type=on.accelerator_type,
        runs_on=runs_on,
        precision=cfg.precision if reason is None else "fp32",
        precision_fallback_reason=reason,
        execution=spec.executes(),
        threads=cfg.threads,
    )


def expand_trials(
    kinds: list[str], workers: list[int], notes: list[str], batches=(None,), compiles=("best",), hardware=("cpu",)
) -> list[TrialSpec]:
    """The trial matrix: per hardware item of a --device sweep, per batch size of a --batch sweep, every kind on
    every worker count it supports, in the order given, each in every execution --compile asks that it has on that
    device (one trial per distinct execution: jax:none is jit both ways), or, under --compile best, once, its
    execution chosen before the trials run (raylab/probes/race.py). A trial carries its hardware item (and its name
    shows it) where --device sweeps or names an accelerator type."""
    tagged = len(hardware) > 1 or any(":" in h for h in hardware)
    specs = []
    fitting = [(item, fitting_workers(item, workers, notes)) for item in kinds]
    for h in hardware:
        device = h.partition(":")[0]
        on = []
        for item, fits in fitting:
            kind = split_trial(item)[0]
            strategy = get_strategy(kind)
            fw, st = kind.split(":")
            best = list(compiles) == ["best"]
            runs = [None] if best else executions(strategy, compiles, device, notes)
            on += [
                TrialSpec(fw, st, w, execution=e, best=best, hardware=h if tagged else None) for w in fits for e in runs
            ]
        specs += [dataclasses.replace(s, batch=b) for b in batches for s in on]
    return specs


def split_trial(item: str) -> tuple[str, int | None]:
    """'tf:mwms x2' -> ('tf:mwms', 2): a trial as raylab names it fixes its worker count; 'tf:mwms' -> None."""
    kind, _, count = " ".join(item.split()).partition(" x")
    if count and not count.isdigit() or count == "0":
        raise UserError(f"trial '{item}': write a worker count as 'KIND xN', e.g. 'tf:mwms x2'.")
    return kind, int(count) if count else None


def fitting_workers(item: str, workers: list[int], notes: list[str]) -> list[int]:
    """The worker counts a trial item runs on: its own ' xN', else --workers', less those its kind cannot (a note
    for those; a UserError where none is left)."""
    kind, fixed = split_trial(item)
    strategy = get_strategy(kind)
    asked = [fixed] if fixed else workers
    fits = [w for w in asked if strategy.max_workers is None or w <= strategy.max_workers]
    if not fits:
        raise UserError(
            f"{kind} runs on at most {strategy.max_workers} worker(s), but it was asked for "
            f"{','.join(map(str, asked))}; add 1 to --workers or pick a multi-worker strategy such as tf:mwms."
        )
    if len(fits) < len(asked):
        notes.append(
            f"{kind} runs on at most {strategy.max_workers} worker(s): skipped workers="
            f"{','.join(str(w) for w in asked if w not in fits)}"
        )
    return fits


def executions(strategy: Strategy, compiles, device: str, notes: list[str]) -> list[str | None]:
    """The distinct executions a kind runs for the --compile values asked (None: its --compile off one); UserError
    where it can run none of them, a note for each it skips."""
    off = strategy.executions["off"]
    runs, skipped = [], []
    for asked in compiles:
        label, why = strategy.execution(asked, device)
        if label is None:
            skipped.append(why)
        elif (None if label == off else label) not in runs:
            runs.append(None if label == off else label)
    if not runs:
        raise UserError(f"{skipped[0]}; drop it from --trials or choose another --compile.")
    notes += [f"{why}: skipped" for why in skipped]
    return runs


def check(cfg: Settings, streamed: bool = False) -> None:
    """Every refusal of what the trials were asked to run with together, before Ray starts (a UserError naming the
    trial, the setting and the fix); what runs otherwise than asked (--precision-fallback fp32) joins cfg.notes.
    `streamed`: the recipe's data streams through Ray Data (raylab/data/stream.py)."""
    cfg.streamed = streamed
    _check_precision(cfg)
    _check_plain(cfg)
    _check_seconds(cfg)
    if cfg.batch_max:
        _check_batch_max(cfg)
    if streamed:
        _check_streamed(cfg)


def _check_precision(cfg: Settings) -> None:
    """A trial that cannot apply --precision stops the command, unless --precision-fallback fp32 was given: then it
    runs fp32, records precision_applied=fp32 with the reason (precision_fallback_reason), and the command says so."""
    for spec in cfg.trials:
        reason = trial(cfg, spec).precision_fallback_reason
        if reason is None:
            continue
        if cfg.precision_fallback != "fp32":
            fix = "drop it from --trials, or add --precision-fallback fp32 to run it in fp32 (recorded as such)"
            raise UserError(f"--precision {cfg.precision}: {spec.name} cannot apply it ({reason}); {fix}.")
        cfg.notes.append(f"{spec.name} runs fp32, not {cfg.precision}: {reason} (--precision-fallback fp32)")


def _check_plain(cfg: Settings) -> None:
    """--plain's scripts run fp32 on CPU, over the trials' epochs: compared with trials that do too."""
    if not cfg.plain:
        return
    if any(h.partition(":")[0] != "cpu" for h in cfg.hardware):
        raise UserError("--plain runs the plain scripts on CPU only; drop --plain or use --device cpu.")
    if cfg.precision != "fp32":
        raise UserError(
            f"--precision {cfg.precision} with --plain: the plain scripts run fp32, so the overhead "
            "ratio would compare two precisions; drop --plain or run fp32."
        )


def _check_seconds(cfg: Settings) -> None:
    """--seconds ends a trial where its one training process has timed enough: a trial of several processes (each
    would decide apart, and the steps they take together must match) and --plain (its scripts run fixed steps) are
    refused."""
    if cfg.seconds is None:
        return
    if not cfg.seconds > 0:
        raise UserError(
            f"--seconds is {cfg.seconds:g}; give the seconds of steady steps each trial should time, "
            "more than 0 (5 is the least a figure is compared at)."
        )
    several = [s.name for s in cfg.trials if trial(cfg, s).layout.ray_workers > 1]
    if several:
        raise UserError(
            f"--seconds ends a trial when its one training process has timed enough, and "
            f"{', '.join(several)} train(s) in several processes; run those with --epochs or "
            "--steps-per-epoch instead (drop them from --trials, or give --workers 1)."
        )
    if cfg.plain:
        raise UserError("--plain runs its plain scripts over the trials' epochs, not for --seconds; drop one of them.")


def _check_batch_max(cfg: Settings) -> None:
    """--batch max where it cannot run (raylab/probes/batchsize.py)."""
    if cfg.resume:
        raise UserError(
            "--resume goes on at the batch each trial already ran; the recorded --batch max cannot search "
            "again. Start a new invocation instead."
        )
    others = [s.kind for s in cfg.trials if not s.strategy.batch_search]
    if others:
        searched = [k for k in kinds() if get_strategy(k).batch_search]
        raise UserError(
            f"--batch max searches {', '.join(searched)} trials (not XLA's, not the parameter-server "
            f"ones): drop {', '.join(sorted(set(others)))}, or give --batch a size."
        )
    if cfg.streamed:
        raise UserError(
            "--batch max needs the data in memory (it runs probes on the first items); give --batch a "
            "size with streamed data."
        )


def _check_streamed(cfg: Settings) -> None:
    """What cannot run on a streamed dataset."""
    for spec in cfg.trials:
        if spec.strategy.ps_roles:
            raise UserError(
                f"{spec.kind} reads in-memory data only (its parameter-server workers take their own "
                "shards outside Ray Train's dataset splits); drop it from --trials or run without --data."
            )
    if cfg.plain:
        raise UserError(
            "--plain runs plain scripts on in-memory arrays; run it without --data (or a streamed "
            "recipe), or drop --plain."
        )


def check_bench(name: str, cfg: Settings) -> None:
    """A step benchmark's trials (raylab/driver/stepbench.py): each framework's one-process kind, and each kind's
    own checks (`Strategy.preflight`: torch_xla's imports, say), before Ray starts."""
    from raylab.task.recipe import single_kinds

    single = single_kinds()
    wrong = [s.kind for s in cfg.trials if s.kind not in single]
    if wrong:
        raise UserError(
            f"{name} is a single-process step benchmark; it runs {', '.join(single)}, not {', '.join(wrong)}."
        )
    for spec in cfg.trials:
        if spec.strategy.preflight:
            spec.strategy.preflight(cfg, {})
