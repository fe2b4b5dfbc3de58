"""One invocation across two node types, priced: the hardware axis on a simulated cluster.

    .venv/bin/python bench/two_types.py --trials torch:none,jax:none --repeats 2 --out /tmp/two-types

Three raylets on this machine (Ray's `cluster_utils.Cluster`, as tests/multinode does), one CPU each: an untyped
head, a node labelled `accelerator_type:T4` and one labelled `accelerator_type:TPU-V4` (how Ray labels a TPU v4
host). Their accelerators are not simulated: every trial runs on its node's CPU, so the two types are the same
cores and differ only in what the price file charges for them (T4 $0.35 an hour, TPU-V4 $3.22, the head $0.05).
The fashion recipe runs each trial on each type (`--accelerator-type T4,TPU-V4`), two at a time (`--concurrency
auto`), repeated; the report it prints ends with the fastest and the cheapest trial to the target with their
intervals. The MLflow store and the console go to DIR (default: a new temporary directory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TYPES = {"T4": 0.35, "TPU-V4": 3.22}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", default="torch:none,jax:none")
    p.add_argument("--repeats", default="2")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="raylab-two-types-"))
    out.mkdir(parents=True, exist_ok=True)
    prices = out / "prices.json"
    prices.write_text(json.dumps({"cpu": 0.05, **TYPES}))

    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for name in TYPES:
        cluster.add_node(num_cpus=1, resources={f"accelerator_type:{name}": 1})
    try:
        cluster.wait_for_nodes(timeout=120)
        command = [
            sys.executable,
            str(ROOT / "recipes" / "fashion.py"),
            "--address",
            cluster.address,
            "--trials",
            args.trials,
            "--accelerator-type",
            ",".join(TYPES),
            "--prices",
            str(prices),
            "--concurrency",
            "auto",
            "--repeats",
            args.repeats,
            "--quick",
            "--epochs",
            "3",
            "--set",
            "target_accuracy=0.8",
            "--tracking-uri",
            f"sqlite:///{out / 'mlflow.db'}",
            "--json",
            str(out / "summary.json"),
        ]
        print("$ " + " ".join(command), flush=True)
        with open(out / "console.txt", "w") as log:
            code = subprocess.run(command, cwd=out, stdout=log, stderr=subprocess.STDOUT, timeout=1800).returncode
        print((out / "console.txt").read_text().split("\n\nexperiment '")[-1][-6000:])
        print(f"exit {code}; console, store and summary under {out}")
        return code
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    sys.exit(main())
