"""What a finished trial records, from what its workers reported: pure functions of their reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrialRecord:
    """What a finished trial records, from what its workers reported."""

    result: dict  # the trial's figures: rank 0's final report, the last epoch's train_*/val_*, wall_s, ...
    metrics: dict  # the result less the per-epoch names (those carry their history, step = epoch)
    tags: dict  # what rank 0 says was built and ran, and the short strategy name asked for
    params: dict  # `strategy`: the short name that actually ran (and global_batch where replicas were found)
    ran: str  # the short strategy name that actually ran


def trial_record(
    final: dict | None,
    epochs: list[dict],
    wall_s: float,
    target: float | None,
    floor: float | None,
    asked: str,
    replicas_found: bool = False,
) -> TrialRecord:
    """What to record of a trial: final (rank 0's final report, with `actual`: what ran), the epochs logged,
    wall_s (start to fit()'s return), target accuracy, startup floor (None: not measured), asked (the short
    strategy name asked for). A pure function."""
    if final is None:
        raise RuntimeError("training ended without rank 0's final report")
    actual = final["actual"]
    result = {**{k: v for k, v in final.items() if k != "actual"}, "wall_s": wall_s}
    last = epochs[-1]
    result.update({k: v for k, v in last.items() if k.startswith(("val_", "train_"))})
    result["time_to_target_s"] = time_to_target(epochs, target)
    if floor is not None:
        result["startup_floor_s"] = floor
    # Per-epoch names already carry their history (step = epoch); log only the new ones, as single values
    # at step 0 (the MLflow UI draws those as bars, one per trial, rather than one-point lines).
    metrics = {k: v for k, v in result.items() if k not in last}
    # What ran is what's recorded: the `strategy` param and the run name say what ran, not what was asked; `shuffle`
    # how rank 0's passes over its data were shuffled (in memory "global"; parity compares it).
    ran = actual["actual_strategy"]
    params = {
        "strategy": ran,
        **({"global_batch": actual["global_batch"]} if replicas_found else {}),
        "shuffle": actual.get("shuffle", "global"),
    }  # the parameter-server kinds: in memory
    tags = {**{k: v for k, v in actual.items() if k != "shuffle"}, "requested_strategy": asked}
    return TrialRecord(result, metrics, tags, params, ran)


def agreement(per_rank: list, nodes: list) -> dict:
    """Whether every replica ended with the same parameters (it must, in sync). With one copy of the
    weights (one replica, asynchronous updates) there is nothing to compare: `n/a`."""
    sums = [float(v) for c in per_rank if c is not None for v in (c if isinstance(c, list) else [c])]
    same = "n/a" if len(sums) < 2 else max(sums) - min(sums) <= 1e-9 * max(abs(v) for v in sums)
    return {
        "replicas_consistent": same,
        "param_checksums": ",".join(f"{v:.10g}" for v in sums),
        "worker_nodes": len(set(nodes)),
        "worker_node_ids": ",".join(str(n)[:12] for n in nodes),
    }


def peak_memory(per_rank: list) -> tuple[dict, dict]:
    """(metrics, tags) of the workers' peak RSS, MB: the largest over ranks, and every rank's."""
    peaks = [p for p in per_rank if p is not None]
    if not peaks:
        return {}, {}
    return (
        {"peak_rss_mb": max(peaks)},
        {"peak_rss_mb_by_rank": ",".join("?" if p is None else f"{p:.0f}" for p in per_rank)},
    )


def beside_figures(reads: list, nodes: list, whose: str = "the trial's own") -> tuple[dict, dict]:
    """(metrics, tags) of what ran beside a trial over its timed window, from each rank's reads of its node
    (raylab/loop/beside.py) and the node it ran on: per node, the cores of other work (the node's busy time less
    the trial's own ranks there and the upkeep: Ray's daemons and this job's other Ray processes), the cores the
    hypervisor stole and the upkeep's cores. The
    metrics are the largest over the trial's nodes; the tag `beside` says each node's, its own cores named `whose`."""
    by_node: dict = {}
    for read, node in zip(reads, nodes):
        if read:
            by_node.setdefault(node, []).append(read)
    if not by_node:
        return {}, {"beside": "not measured (no steady window, or no /proc to read)"}
    per = {}
    for node, rs in by_node.items():
        first = rs[0]  # every rank on a node reads the same node; its window is near enough theirs
        wall = first["all"] / first["cpus"]  # ticks one CPU has in the window
        # the first rank's read of this job's Ray processes holds the other ranks' processes: theirs are own work
        siblings = sum(r.get("own_main", 0) for r in rs[1:])
        busy, steal, daemons = first["busy"] / wall, first["steal"] / wall, max(0.0, first["ray"] - siblings) / wall
        own = sum(r["own"] / (r["all"] / r["cpus"]) for r in rs)
        per[node] = (max(0.0, busy - own - daemons), steal, daemons, own, first["seconds"], first["cpus"])
    metrics = {
        "beside_cores": max(v[0] for v in per.values()),
        "steal_cores": max(v[1] for v in per.values()),
        "ray_daemon_cores": max(v[2] for v in per.values()),
        "beside_s": min(v[4] for v in per.values()),
    }  # the window read: too short, and a tick is a lot
    tag = "; ".join(
        f"node {str(n)[:12]}: {o:.2f} cores of other work, {st:.2f} stolen, Ray and this job {d:.2f}, "
        f"{whose} {w:.2f} of {c} CPUs, over {sec:.1f} s"
        for n, (o, st, d, w, sec, c) in per.items()
    )
    return metrics, {"beside": tag}


def failures_tag(failures: list[dict]) -> str:
    """Each failure of the worker group and what was done about it, oldest first, with the attempt it ended and the
    processes the trial had then ("attempt 1 (pids 21786): what -> decision | ...")."""

    def said(f: dict) -> str:
        where = f"attempt {f['attempt']}" if "attempt" in f else ""
        if f.get("pids"):
            where += f" (pids {','.join(str(p) for p in f['pids'])})"
        return (f"{where}: " if where else "") + f"{f['what']} -> {f['decision']}"

    return " | ".join(said(f) for f in failures)[:5000]


def start_env_tag(envs: list[dict]) -> str:
    """The environments the trial's worker processes started with, each distinct one once ("K=V,K=V | ...")."""
    distinct = dict.fromkeys(",".join(f"{k}={v}" for k, v in sorted(env.items())) for env in envs)
    return " | ".join(distinct) or "none"


def time_to_target(epochs: list[dict], target: float | None) -> float | None:
    """Seconds from trial start to the end of the first epoch whose test accuracy reached the target."""
    if target is None:
        return None
    return next((e["elapsed_s"] for e in epochs if e.get("val_accuracy", 0.0) >= target and "elapsed_s" in e), None)
