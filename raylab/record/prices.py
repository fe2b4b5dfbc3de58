"""What a trial cost: a price per node type (`--prices FILE`, a JSON object of node type -> US dollars an hour) and
the nodes the trial held for its wall time. A node's type is its accelerator type where Ray knows one (its
`accelerator_type:X` resource: "H200", "A100-80G", ...), else "cpu"."""

from __future__ import annotations

import json
from pathlib import Path

from raylab.errors import UserError

ACCELERATOR = "accelerator_type:"


def read_prices(path: Path | None) -> dict | None:
    """The price file's node type -> USD an hour, checked; None without one."""
    if path is None:
        return None
    try:
        prices = json.loads(Path(path).read_text())
    except OSError as e:
        raise UserError(
            f'--prices {path}: {e.strerror or e}; give a JSON file such as {{"cpu": 0.10, "H200": 3.72}}.'
        ) from None
    except ValueError as e:
        raise UserError(f'--prices {path} is not JSON ({e}); give an object such as {{"cpu": 0.10}}.') from None
    if (
        not isinstance(prices, dict)
        or not prices
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in prices.values())
    ):
        raise UserError(
            f"--prices {path}: give an object of node type -> US dollars an hour (numbers >= 0), such as "
            '{"cpu": 0.10, "H200": 3.72}; a node\'s type is its accelerator type, else cpu.'
        )
    return {str(k): float(v) for k, v in prices.items()}


def node_type(resources: dict) -> str:
    return next((k[len(ACCELERATOR) :] for k in sorted(resources) if k.startswith(ACCELERATOR)), "cpu")


WHOLE = "its nodes, whole, for its wall time (no other trial holds a node while it runs)"
SIMULATED = "its nodes, whole, for its wall time, priced as the nodes they stand for (a simulated cluster: one machine)"


def cost(prices: dict, held: list[dict], result: dict, simulated: bool = False) -> tuple[dict, dict]:
    """(metrics, tags) of a trial that held nodes with these resources: cost_usd (its wall time at their hourly
    rate) and cost_to_target_usd, with the rate, the node types and how it was billed (the tag cost_split: a node
    is held by one trial at a time, raylab/driver/matrix.py `Nodes`, so a trial pays its nodes whole; on a simulated
    cluster they are one machine's, priced as what they stand for); a type the file has no price for: a tag saying
    so, and no cost."""
    types = [node_type(r) for r in held]
    missing = sorted({t for t in types if t not in prices})
    if missing or not held:
        return {}, {"cost": f"not counted: --prices has no price for {', '.join(missing) or 'no node held'}"}
    rate = sum(prices[t] for t in types)
    metrics = {"price_usd_per_hour": rate, "cost_usd": result["wall_s"] * rate / 3600}
    if result.get("time_to_target_s") is not None:
        metrics["cost_to_target_usd"] = result["time_to_target_s"] * rate / 3600
    return metrics, {"node_types": ",".join(types), "cost_split": SIMULATED if simulated else WHOLE}
