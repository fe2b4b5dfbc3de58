"""--compile best (the default): each framework's execution measured on the recipe's own model, never assumed.

Which execution wins depends on the model and the machine (bench/results.md, "Compiled against eager"). So before the
trials, for each (framework, batch per replica, precision) of the invocation whose kinds have more than one candidate
(Strategy.candidates: torch eager and Inductor, TF's tf.function and XLA; jax and torch_xla have one), one Ray actor
with a trial's CPUs, threads and device, set up by the worker's own function, builds the recipe's model in each
candidate as a trial's worker does (the framework's race.py), runs its first step (compilation), then times windows
of each in turn (raylab/timing.py side_by_side); as many at once as the cluster holds. Every trial of that
framework trains in the candidate its kind can run (tf:mirrored has no XLA step) that its steps spend least in,
past the race's noise (raylab/probes/choice.py). A candidate that fails is recorded with its error; the others run.

The answer is kept in this host's store (raylab/probes/store.py), keyed on the host's identity
(raylab/probes/host.py: raylab's version and source, the framework's and its compilers' and runtimes' versions),
the cluster's hosts and accelerator types, the device, the recipe's model and task (the source of the model builder
and of the user's modules it imports, the
task's loss, optimizer, schedule and metrics, the input shapes), batch, precision and threads, dated; the next
invocation of the same recipe reads it instead of racing (--race-again measures again). Each trial records what ran
(`execution`), how it was chosen (`execution_choice`), every candidate's steady step time and first step
(`execution_candidates`), what each would have spent on its steps (`execution_projected`), the winner's margin a
step and the race's wall time, apart from its own start-up and training (`race_s`, `race_source`).
"""

from __future__ import annotations

import dataclasses

import math
import time

from raylab.config import Settings, TrialSpec
from raylab.probes.choice import Choice
from raylab.probes.race_key import cache_key
from raylab.registry import framework
from raylab.settings import resolve

RACE_TIMEOUT_S = 1800.0  # compiling the ResNet-UNet took 52 s here; a race past this is given up: usual executions
RACE_ROWS, RACE_MB = 128, 64  # batches of training rows a race steps over, and its most MB of inputs


def key_of(recipe, cfg: Settings, spec: TrialSpec) -> tuple:
    """(framework, batch per replica, precision, hardware item or None): what one race answers within an
    invocation (a --device sweep races on each device, each accelerator type)."""
    layout = spec.layout(cfg)
    precision = resolve.trial(cfg, spec).precision
    return spec.framework, recipe.with_batch(spec.batch).per_replica(layout.replicas), precision, spec.hardware


def choose(recipe, cfg: Settings, ds, shared) -> None:
    """Every --compile best trial's execution chosen (cfg.trials rewritten, cfg.best filled): each key's kept answer,
    its only candidate, or a race (run_races)."""
    keys = {}
    for spec in cfg.trials:
        if spec.best:
            keys.setdefault(key_of(recipe, cfg, spec), []).append(spec)
    racing = {}
    for key, specs in keys.items():
        labels = list(dict.fromkeys(c for s in specs for c in s.strategy.candidates(cfg.at(key[3]).device)))
        if key in cfg.best:  # a --resume's or a sweep's earlier answer
            continue
        if len(labels) < 2:
            cfg.best[key] = Choice({labels[0]: {}}, 0.0, "its only candidate")
            continue
        rows = race_rows(ds, shared, key[1])
        if (found := kept(recipe, cfg, key, labels, rows[0])) is not None:
            cfg.best[key] = found
        else:
            racing[key] = (labels, rows)
    cfg.best.update(run_races(recipe, cfg, ds, racing))
    items = shared.info.train_items if getattr(ds, "streamed", False) else ds.train_items
    cfg.trials = [chosen(recipe, cfg, s, items) for s in cfg.trials]
    for key, specs in keys.items():
        say(key, cfg.best[key], [s for s in cfg.trials if s.best and s.name in {t.name for t in specs}])


def chosen(recipe, cfg: Settings, spec: TrialSpec, items: int) -> TrialSpec:
    """The spec with its execution set from its key's Choice (None: its kind's usual execution), for the steps
    its trial runs on `items` training items (kept on the Choice for params())."""
    if not spec.best:
        return spec
    choice = cfg.best[key_of(recipe, cfg, spec)]
    replicas = spec.layout(cfg).replicas
    per_epoch = cfg.steps_per_epoch or max(1, items // (recipe.with_batch(spec.batch).per_replica(replicas) * replicas))
    steps = cfg.epochs * per_epoch
    timed = [got["step_ms"] for got in choice.candidates.values() if "step_ms" in got]
    if cfg.seconds is not None and timed:  # it ends at --seconds of steady steps: as many as the fastest step takes
        steps = min(steps, recipe.warmup_steps + math.ceil(cfg.seconds * 1e3 / min(timed)))
    choice.steps[spec.name] = steps
    label = choice.for_kind(spec.kind, cfg.on(spec).device, steps)
    return dataclasses.replace(spec, execution=None if label == spec.strategy.executions["off"] else label)


def params(recipe, cfg: Settings, spec: TrialSpec) -> dict:
    """What a trial records of how its execution was chosen: forced by --compile, or the Choice's params."""
    if not spec.best:
        return {"execution_choice": "forced"}
    choice = cfg.best[key_of(recipe, cfg, spec)]
    return choice.params(spec.executes(), spec.strategy.candidates(cfg.on(spec).device), choice.steps.get(spec.name))


def kept(recipe, cfg: Settings, key: tuple, labels: list[str], x) -> Choice | None:
    """This host's kept answer for `key`, or None (none kept, or --race-again)."""
    if cfg.race_again:
        return None
    found = read_cache(cache_key(recipe, cfg, key, labels, x), key[0])
    return (
        Choice(found["value"]["candidates"], 0.0, f"kept on this host since {found['measured'][:16]}")
        if found
        else None
    )


def say(key: tuple, choice: Choice, trials: list[TrialSpec]) -> None:
    """The choice on the console: what the key's trials train in, what each candidate would spend on their steps,
    every candidate's figures, where the answer came from."""
    from raylab.runtime import console

    if choice.source == "its only candidate":
        return
    took = ", ".join(dict.fromkeys(s.executes() for s in trials)) or (choice.ranked() or list(choice.candidates))[0]
    timed = [label for label, got in choice.candidates.items() if "step_ms" in got]
    spent = "; ".join(
        f"{n} steps: " + ", ".join(f"{label} {choice.projected(label, n):.1f} s" for label in timed)
        for n in sorted({choice.steps[s.name] for s in trials if s.name in choice.steps})
    )
    on = f", on {key[3]}" if key[3] else ""
    console.get().line(
        f"raylab: --compile best: {framework(key[0]).title} (batch {key[1]}, {key[2]}{on}) trains in "
        f"{took}"
        + (f" ({spent}, first step included)" if spent and len(timed) > 1 else "")
        + f" ({choice.described()}; {choice.source}"
        + (f", {choice.race_s:.1f} s" if choice.race_s else "")
        + ")"
    )


def race_rows(ds, shared, batch: int):
    """(x, y): the first RACE_ROWS batches of the training split, at most RACE_MB of inputs, at least two batches
    (read from the stream where it streams). A pass over a few batches is not a trial's: TF's shuffled pipeline
    over 8 batches of the fashion MLP cost 0.98 ms a step against 0.78 over 128."""
    from raylab.data import num_items, tree_map

    n = batch * RACE_ROWS
    if not getattr(ds, "streamed", False):
        row = sum(a[:1].nbytes for a in (ds.x_train.values() if isinstance(ds.x_train, dict) else [ds.x_train]))
        n = max(2 * batch, min(n, RACE_MB * 2**20 // max(row, 1)))
        n = min(n, num_items(ds.y_train))
        return tree_map(lambda a: a[:n], ds.x_train), tree_map(lambda a: a[:n], ds.y_train)
    return shared.info.split(shared.datasets["train"].take_batch(batch * 16, batch_format="numpy"))


def run_races(recipe, cfg: Settings, ds, racing: dict) -> dict:
    """{key: Choice} for each key's (candidates, rows to step over): a Racer (a Ray actor with a trial's CPUs, threads
    and device) per key, in waves the cluster holds at once (`waves`), each ended before the next wave starts."""
    import ray

    out, free = {}, ray.available_resources()
    for wave in waves({key: racer_needs(cfg.at(key[3])) for key in racing}, free):
        out.update(race_wave(recipe, cfg, ds, {key: racing[key] for key in wave}))
    return out


def waves(needs: dict, free: dict) -> list[list]:
    """The keys in order, in waves whose racers' needs ({resource: amount}) fit in `free` together (alone: it waits)."""
    out, wave, room = [], [], dict(free)
    for key, need in needs.items():
        if wave and any(room.get(r, 0.0) < n for r, n in need.items()):
            out, wave, room = out + [wave], [], dict(free)
        wave.append(key)
        room = {r: room.get(r, 0.0) - need.get(r, 0.0) for r in set(room) | set(need)}
        if min(room.values(), default=0.0) < 0:  # it fits nowhere now: alone
            out, wave, room = out + [wave], [], dict(free)
    return out + [wave] if wave else out


def racer_needs(on: Settings) -> dict:
    """What one Racer holds while it runs: a trial's CPUs, its GPU, a sliver of its nodes' accelerator type."""
    from raylab.driver.resources import ACCELERATOR_SLIVER
    from raylab.record.prices import ACCELERATOR

    return {
        "CPU": float(on.threads),
        **({"GPU": 1.0} if on.device == "gpu" else {}),
        **({ACCELERATOR + on.accelerator_type: ACCELERATOR_SLIVER} if on.accelerator_type else {}),
    }


def race_wave(recipe, cfg: Settings, ds, racing: dict) -> dict:
    """{key: Choice} of one wave: its racers make their candidates ready at once (tracing, compiling), then each
    times its candidates alone, one after another (no figure taken beside another's work). A racer that fails as a
    whole (its process lost, the timeout) is every candidate's failure: its trials run their usual execution."""
    import ray

    from raylab.config import compile_cache_dir
    from raylab.runtime import console

    racers, out = {}, {}
    for key, (labels, (x, y)) in racing.items():
        name, batch, precision, hardware = key
        on = cfg.at(hardware)  # the device (and nodes' accelerator type) its trials run on
        console.get().line(
            f"raylab: --compile best: timing {framework(name).title}'s {' and '.join(labels)} on "
            f"{recipe.name}'s model (batch {batch}, {precision}, {hardware or on.device}, "
            f"{cfg.threads} thread(s)) before its trials..."
        )
        racer = racer_actor(on, name).remote(
            name,
            recipe.task(ds.target_names),
            x,
            y,
            batch,
            labels,
            precision,
            on.device,
            cfg.threads,
            cfg.seed,
            compile_cache_dir(cfg, "race"),
            cfg.window,
        )
        racers[key] = (racer, racer.ready.remote(), cache_key(recipe, cfg, key, labels, x), time.perf_counter())
    try:
        failed = {key: _get(ready, racing[key][0]) for key, (_, ready, _, _) in racers.items()}  # every racer ready
        for key, (racer, _, host_key, t0) in racers.items():
            labels, candidates = racing[key][0], failed[key]
            if len(candidates) < len(labels):  # a candidate is ready: time it (and any other) alone
                candidates = {**_get(racer.timed.remote(), labels), **candidates}
            out[key] = Choice({label: candidates[label] for label in labels}, time.perf_counter() - t0, "raced")
            if out[key].ranked():
                write_cache(
                    host_key,
                    key[0],
                    out[key],
                    f"{framework(key[0]).title}, batch {key[1]}, {key[2]}, "
                    f"{key[3] or cfg.device}, {cfg.threads} thread(s), {recipe.name}'s model",
                )
            ray.kill(racer)
    finally:
        for racer, *_ in racers.values():
            ray.kill(racer)
    return out


def racer_actor(cfg: Settings, name: str):
    """The Racer's Ray actor class for framework `name`, with a trial's CPUs, threads, device and accelerator type and
    the environment the framework reads at import (Framework.import_env)."""
    import ray

    env = {
        "OMP_NUM_THREADS": str(cfg.threads),
        **framework(name).import_env,
        **({"CUDA_VISIBLE_DEVICES": ""} if cfg.device == "cpu" else {}),
    }
    need = racer_needs(cfg)
    on = {"resources": {r: n for r, n in need.items() if r not in ("CPU", "GPU")}} if cfg.accelerator_type else {}
    return ray.remote(max_restarts=0)(Racer).options(
        num_cpus=need["CPU"], num_gpus=need.get("GPU", 0), runtime_env={"env_vars": env}, **on
    )


def _get(ref, labels: list[str]) -> dict:
    """A racer's answer, or every candidate's failure where the racer itself failed."""
    import ray

    try:
        return ray.get(ref, timeout=RACE_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - the racer's own failure is every candidate's
        return {label: {"error": f"the race failed: {first_line(e)}"} for label in labels}


class Racer:
    """On a Ray worker of its own: a framework's candidate executions made ready (built, first step), then timed
    side by side (raylab/timing.py side_by_side)."""

    def __init__(self, name, task, x, y, batch, labels, precision, device, threads, seed, cache_dir, window):
        self.args, self.window = (task, x, y, batch), window
        self.more = (precision, device, threads, seed, cache_dir)
        self.name, self.labels, self.runs = name, labels, {}

    def ready(self) -> dict:
        """{label: {"error": why}} of the candidates that could not be made ready (the others wait for timed)."""
        part, failed = framework(self.name).part("race"), {}
        for label in self.labels:
            try:
                self.runs[label] = part.ready(*self.args, label, *self.more)
            except Exception as e:  # noqa: BLE001 - a candidate that cannot run is recorded and left out
                failed[label] = {"error": first_line(e)}
        return failed

    def timed(self) -> dict:
        from raylab.timing import side_by_side

        return side_by_side(self.runs, budget_s=2.0, max_window=self.window) if self.runs else {}


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {(text.splitlines() or [''])[0][:200]}"


# --- this host's kept answers ------------------------------------------------------------------------------------


def read_cache(host_key: str, name: str) -> dict | None:
    """The kept race of framework `name` for `host_key` (cache_key()), where kept for this host's identity of it."""
    from raylab.probes import store
    from raylab.probes.host import identity

    return store.read("race", host_key, identity([framework(name)]))


def write_cache(host_key: str, name: str, choice: Choice, about: str) -> None:
    """Keeps a race's answer in this host's store (raylab/probes/store.py); a read-only HOME races again next time."""
    from raylab.probes import store
    from raylab.probes.host import identity

    store.keep(
        "race",
        host_key,
        {"candidates": choice.candidates},
        identity([framework(name)]),
        f"{about}: {choice.described()}"[:400],
    )
