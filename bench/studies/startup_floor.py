"""The floor under a trial's start-up on this machine (raylab/probes/floor.py measures it), with Ray Train's poll.

- `fit`: a bare Ray Train `fit()` whose training function does nothing, on a 1-worker (1 CPU) scaling config,
  on a fresh in-process cluster: to the training function's first line, and to `fit()`'s return, once with
  Ray Train's default controller poll (RAY_TRAIN_HEALTH_CHECK_INTERVAL_S, 2 s) and once with raylab's 0.2 s.
- `import X`: `python -c "import X"` in a fresh process (interpreter start included), for tensorflow, torch
  and torch_xla, beside `python -c pass`.

Each figure is the median of --rounds, side by side in one run. `raylab floor` measures the same with raylab's
poll and keeps it for the trials to record beside their `startup_s`.

    python bench/studies/startup_floor.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics

from raylab.probes.floor import fit_seconds, import_seconds

IMPORTS = ("pass", "import tensorflow", "import torch", "import torch_xla")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args()
    imports: dict[str, list[float]] = {s: [] for s in IMPORTS}
    for _ in range(args.rounds):
        for s in IMPORTS:
            imports[s].append(import_seconds(s))
    figures = {f"python -c '{s}'": v for s, v in imports.items()}
    for label, poll in (("default poll (2 s)", None), ("poll 0.2 s", 0.2)):
        fits = fit_seconds(args.rounds, poll)
        figures[f"fit to the function, {label}"] = [e for e, _ in fits]
        figures[f"fit to its return, {label}"] = [t for _, t in fits]
    print(f"{'what':<40} {'median s':>9}  rounds")
    for name, values in figures.items():
        print(f"{name:<40} {statistics.median(values):9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
