"""The plain script: a trial's job as the best plain single-process script, no Ray and none of raylab's loop.

`--plain` runs `python -m raylab.frameworks.plain SPEC.json` beside the trials, so the comparison shows
what raylab costs. Same task (cloudpickled by the driver: model builder, loss, optimizer, schedule,
metrics, preprocessing, built by raylab.task's framework builders, which only construct the
framework's own objects), data (the 1-worker shard, i.e. all of it), batch, threads and seed as the
framework's 1-worker trial, in the code a careful user writes for speed: each framework's `run` in
raylab/frameworks/<name>/plain.py (Keras `fit` with `steps_per_execution`; the usual torch loop reading the
loss back only on log steps).

Steady state is timed between those reads, as the trials are. What ran beside the script on the machine is read
as a trial's is (raylab/loop/beside.py), over the whole script after its data are loaded: `--plain` runs it while the
invocation's cluster is up, and the driver records that cluster's share (`beside`, `ray_daemon_cores`). RAYLAB_RAY_JOB
names the driver's Ray job, whose processes count as the cluster's. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time

from raylab.registry import framework
from raylab.timing import Chrono


def steps_of(spec: dict, n: int) -> int:
    return spec["steps_per_epoch"] or n // spec["batch"]


def timed(chrono: Chrono, batch: int, trace: bool = False) -> dict:
    """Steady-state figures; with trace, every window as [end (wall clock), seconds, steps] too."""
    s = chrono.summary(batch)
    out = {
        k: s[k]
        for k in ("samples_per_sec", "step_time_p50_ms", "step_time_p90_ms", "first_step_s", "steady_steps", "steady_s")
    }  # steady_s: what samples/s rests on, as a trial's (too short to time: marked)
    if trace:
        out["trace"] = [[end, secs, steps] for end, (secs, steps) in zip(chrono.ends, chrono.windows)]
    return out


def arrays(x):
    return x.values() if isinstance(x, dict) else [x]


def main(spec_path: str) -> None:
    import cloudpickle

    start = time.time()
    with open(spec_path) as f:
        spec = json.load(f)
    with open(spec["task"], "rb") as f:
        task, (x, y, xt, yt) = cloudpickle.load(f)
    from raylab.loop.beside import Beside

    run = framework(spec["framework"]).part("plain").run
    beside = Beside(job=os.environ.get("RAYLAB_RAY_JOB"))
    beside.begin()
    result = run({**spec, "start": start}, task, x, y, xt, yt)
    read = beside.end()
    last = {k: v for k, v in result["epochs"][-1].items() if k.startswith("val_")}
    print(json.dumps({**result, **last, **({"beside_read": read} if read else {})}))


if __name__ == "__main__":
    main(sys.argv[1])
