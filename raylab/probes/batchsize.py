"""`--batch max`: the largest per-replica batch a trial's step runs without running out of memory.

Before a trial starts, the driver tries batch sizes. Each size is the trial itself, cut short: its
strategy on its workers (new Ray Train worker processes, the same kind of process the trial trains in),
with its precision, threads and --memory-cap-mb, for PROBE_STEPS training steps and one evaluation batch of
the same size (rank 0 evaluates in batches of the training batch: a size that trains but cannot evaluate does not
fit), without checkpoints or an MLflow run. A probe that runs out of memory (raylab/failure.py names it) did not fit.
The search doubles from the recipe's batch until a size runs out of memory (or reaches the largest a
replica's shard allows), then bisects between the last size that ran and the first that did not, down to
one item, as Lightning's batch-size finder does in its "binsearch" mode. The trial then runs at the size
found less a 10% margin (MARGIN), named "... bN", and records the search (tag batch_search), the edge
(batch_search_found: the largest size that passed) and the size one above it that ran out of memory, and how many
probes it ran (batch_search_probes: a size tried twice
counts twice).

Why whole trials rather than a bare step in a process of its own: a cap counts the process's whole data
segment, and a Ray Train worker holds more of it than a bare process (its threads, its data shard, the
loop); a bare probe found sizes that then ran out of memory in the trial. Evaluation (no gradients) is not
probed. An error that is not out of memory (a recipe bug) stops the search and fails the trial with it.
Under --memory-cap-mb an allocation in native code can abort a worker instead of raising MemoryError: the
process dies with no Python error. Such a size is tried once more; if its worker dies again, it counts as
out of host memory (the search records that the worker died).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace

from raylab.errors import UserError

PROBE_STEPS = 3  # training steps each size runs: the first allocates the optimizer's state, the others reuse it
# The trial runs at this share of the largest size that passed. At the very edge a size that passed its probe
# ran out of memory later in the trial (TF, 751 items: passed 2 probe steps, ran out on the trial's third; the
# allocators' arenas grow over a run), so the trial keeps a margin; the edge itself is recorded.
MARGIN = 0.9


@dataclass
class Search:
    """The sizes tried, in order, and what each did."""

    # {"batch", "ok", "seconds", "peak_rss_mb", "memory", "error", "probes": 2 where a size was tried twice}
    tried: list[dict] = field(default_factory=list)

    def probes(self) -> int:
        """The probes run, a size tried twice counted twice: under a cap each is a Ray Train run of its own."""
        return sum(t.get("probes", 1) for t in self.tried)

    def ok(self) -> list[int]:
        return [t["batch"] for t in self.tried if t["ok"]]

    def failed(self) -> list[int]:
        return [t["batch"] for t in self.tried if not t["ok"]]

    def describe(self) -> str:
        parts = []
        for t in self.tried:
            what = "ok" if t["ok"] else f"out of {t['memory']} memory"
            if t.get("died"):
                what += " (the worker process died twice under the cap, with no error)"
            elif t.get("probes", 1) > 1:
                what += " (tried twice: a worker died once under the cap, with no error)"
            parts.append(f"{t['batch']} {what} ({t['seconds']:.1f} s, peak RSS {t['peak_rss_mb']:,.0f} MB)")
        return " · ".join(parts)


def bisect(fits, start: int, limit: int) -> tuple[int, int | None]:
    """(largest size that fits, smallest that did not, None if `limit` fits): doubling from `start`, halving
    below it if it does not fit, then bisecting to one item. fits(b) -> bool runs one probe."""
    lo, hi, b = 0, None, min(start, limit)
    while fits(b):
        lo = b
        if b >= limit:
            return lo, None
        b = min(2 * b, limit)
    hi = b
    if lo == 0:
        b = hi // 2
        while b >= 1 and not fits(b):
            hi, b = b, b // 2
        if b < 1:
            return 0, hi
        lo = b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def find(recipe, cfg, spec, ds, shared, nodes=None, log=print, groups=None) -> tuple[int, Search, int | None]:
    """(per-replica batch found, the search, the smallest size that ran out of memory, None if none did)."""
    from raylab.data import num_items

    layout = spec.layout(cfg)
    limit = num_items(ds.x_train) // layout.replicas  # a replica's shard: no step takes more
    task = recipe.task(ds.target_names)
    probe_cfg = replace(
        cfg, epochs=1, steps_per_epoch=PROBE_STEPS, window=PROBE_STEPS, max_failures=0, profile=False, probe=True
    )
    search = Search()

    def fits(batch: int) -> bool:
        per = recipe.with_batch(batch * layout.replicas if recipe.global_batch else batch)
        started = time.time()
        out = probe(per, probe_cfg, spec, task, shared, nodes, batch, groups)
        probes = 1
        if out.get("died"):  # a worker died under the cap with no error: once more, to tell a fluke from the edge
            log(
                f"[{spec.name}] batch search: {batch} per replica: a worker died with no error "
                f"({out['error']}); trying that size once more"
            )
            out, probes = probe(per, probe_cfg, spec, task, shared, nodes, batch, groups), 2
        out.update(batch=batch, seconds=time.time() - started, probes=probes)
        search.tried.append(out)
        said = "ok" if out["ok"] else f"out of {out['memory']} memory"
        log(
            f"[{spec.name}] batch search: {batch} per replica {said} ({out['seconds']:.1f} s, "
            f"peak RSS {out['peak_rss_mb']:,.0f} MB)"
        )
        return out["ok"]

    found, failed = bisect(fits, recipe.per_replica(layout.replicas), limit)
    if found == 0:
        raise UserError(
            f"{spec.name}: even a batch of 1 runs out of memory"
            + (f" under --memory-cap-mb {cfg.memory_cap_mb}" if cfg.memory_cap_mb else "")
            + "; give the workers more memory or use a smaller model."
        )
    return found, search, failed


def probe(recipe, cfg, spec, task, shared, nodes, batch: int, groups=None) -> dict:
    """One size: the trial itself (its strategy, workers, precision, memory cap) for PROBE_STEPS steps and one
    evaluation batch, without checkpoints or an MLflow run, in a warm worker group where its kind can share one (groups:
    the invocation's, raylab/driver/groups.py). {"ok", "peak_rss_mb"}, with "memory" where it ran out; any other
    failure is raised."""
    import ray

    from raylab import failure
    from raylab.runtime import console
    from raylab.driver.outcome import INTERRUPTED
    from raylab.record.sink import TrialSink, abort_line_of

    sink = TrialSink.remote([])
    out = console.get()
    if cfg.memory_cap_mb:  # its workers' lines go to driver.log (no trial is open yet): an allocator abort names it
        out.watch(out.path("driver.log"), failure.allocator_abort, sink.aborted.remote)
    try:
        try:
            ran_out = run_probe(recipe, cfg, spec, task, shared, nodes, sink, groups)
        except Exception as e:  # noqa: BLE001 - out of memory is the answer; anything else is the trial's error
            if INTERRUPTED.is_set():  # Ctrl-C took the workers down: no answer, and no size to try again
                raise KeyboardInterrupt("the batch search was interrupted") from e
            code = failure.code_failures(e)
            aborted = abort_line_of(sink) if cfg.memory_cap_mb else None
            cause = failure.abort_cause(aborted) if aborted else None
            if not code and cause and cause.startswith("out of"):  # its allocator aborted it: counted at once
                return {"ok": False, "memory": "host", "error": cause, "peak_rss_mb": 0.0}
            if not code and cfg.memory_cap_mb and failure.lost_processes(e):
                # Under a cap, an allocation in native code can abort the worker rather than raise (or a bare
                # SIGSEGV, likely the same): the process is gone with no Python error. fits() retries such a size
                # once before it counts as no fit.
                return {
                    "ok": False,
                    "memory": "host",
                    "died": True,
                    "error": cause or failure.describe(e),
                    "peak_rss_mb": 0.0,
                }
            if not code or code[0].kind != "out_of_memory":
                raise RuntimeError(
                    f"the batch search's probe at {batch} per replica failed: {failure.describe(e)}"
                ) from e
            return ran_out_of_memory(code[0].line)
        if ran_out:  # a warm group's probe: the group went on
            return ran_out_of_memory(ran_out)
        _, _, final = ray.get(sink.poll.remote(), timeout=60)
        if INTERRUPTED.is_set() or final is None:  # fit() returns after Ctrl-C too: no answer, not a fit
            raise KeyboardInterrupt("the batch search was interrupted")
        peaks = [p for p in ray.get(sink.peak_rss.remote(), timeout=60) if p is not None]
        return {"ok": True, "peak_rss_mb": max(peaks) if peaks else 0.0}
    finally:
        out.watch(out.path("driver.log"), None)  # no longer
        ray.kill(sink)


def ran_out_of_memory(line: str) -> dict:
    peak = re.search(r"host peak RSS ([\d,]+) MB", line)
    return {
        "ok": False,
        "memory": "device" if "out of device memory" in line else "host",
        "error": line,
        "peak_rss_mb": float(peak.group(1).replace(",", "")) if peak else 0.0,
    }


def run_probe(recipe, cfg, spec, task, shared, nodes, sink, groups) -> str | None:
    """Runs one probe: in its kind's warm group where there is one (or starts one), else a Ray Train run of its own.
    The line of an out-of-memory failure a warm group went on after, else None (other failures are raised)."""
    import uuid

    from raylab.driver.trainer import build_group_trainer, build_trainer, worker_config

    run_id = f"probe-{uuid.uuid4().hex[:12]}"
    group, cold = groups.find(spec, cfg) if groups is not None else (None, "no groups")
    if cold:
        build_trainer(recipe, cfg, spec, task, shared, sink, time.time(), run_id, nodes).fit()
        return None
    if group is None:
        name = f"raylab-group-{run_id}"
        trainer = lambda queue, setup: build_group_trainer(cfg, setup, queue, name, groups.share())  # noqa: E731
        group = groups.begin(spec, name, trainer, cfg)
    return group.wait(
        group.submit(spec.kind, worker_config(recipe, cfg, spec, task, shared, sink, time.time(), run_id))
    )


def for_trial(recipe, cfg, spec, ds, shared, nodes: list | None, groups=None) -> tuple:
    """--batch max: the trial at the largest per-replica batch its probes fit (find), said on the console, and the
    search's tags."""
    from raylab.runtime import console

    found, search, failed = find(recipe, cfg, spec, ds, shared, nodes, log=console.get().line, groups=groups)
    replicas = spec.layout(cfg).replicas
    run = max(1, int(found * MARGIN)) if failed else found
    over = f"; {failed} ran out of memory" if failed else "; the largest a replica's shard allows"
    console.get().line(
        f"[{spec.name}] batch search: {found} per replica is the largest that passed{over}; the "
        f"trial runs at {run}" + (f" ({MARGIN:.0%} of it)" if run != found else "")
    )
    tags = {
        "batch_search": search.describe(),
        "batch_search_found": found,
        "batch_search_ran": run,
        "batch_search_probes": search.probes(),
        "batch_search_failed": failed if failed else "none (the shard's size was reached)",
    }
    return replace(spec, batch=run * replicas if recipe.global_batch else run), tags
