"""`raylab compare` and `raylab upload`: commands on the MLflow store alone (no Ray)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from raylab import config
from raylab.errors import UserError


def compare_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="raylab compare", description="Print the trials of a raylab invocation side by side, from MLflow."
    )
    p.add_argument("--experiment", required=True, help="MLflow experiment name (a recipe's --experiment)")
    p.add_argument(
        "--run", default=None, help="parent run id (default: your latest invocation in the experiment, see --user)"
    )
    p.add_argument(
        "--user",
        default=None,
        help="without --run: the latest invocation of this user (MLflow's user tag, what the UI's User "
        "column shows), for a tracking server several people write to (default: you: "
        "$MLFLOW_TRACKING_USERNAME, else your login name)",
    )
    p.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db here")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format (default: table)")
    p.add_argument(
        "--chart",
        type=Path,
        default=None,
        help="PNG path for the chart (default: raylab-EXPERIMENT.png; with table format)",
    )
    args = p.parse_args(argv)
    try:
        from raylab.compare.table import compare
        from raylab.record.tracking import Tracker

        uri = args.tracking_uri or config.default_tracking_uri()
        if uri.startswith("sqlite:") and not Path(uri.split("sqlite:///", 1)[-1]).exists():
            raise UserError(f"no MLflow store at {uri}; run a recipe first or pass --tracking-uri.")
        tracker = Tracker(uri)
        chart = args.chart or Path(f"raylab-{args.experiment}.png")
        print(
            compare(
                tracker,
                args.experiment,
                args.run,
                args.format,
                chart if args.format == "table" else None,
                user=args.user,
            )
        )
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    return 0


def upload_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="raylab upload",
        description="Send the MLflow writes a run kept while its tracking server was away "
        "(the raylab-pending-*.json file it named) to the server.",
    )
    p.add_argument("file", type=Path, help="the raylab-pending-*.json file")
    p.add_argument("--tracking-uri", default=None, help="default: the URI the run used, as saved in the file")
    args = p.parse_args(argv)
    try:
        from raylab.record.tracking import Tracker

        if not args.file.is_file():
            raise UserError(f"{args.file} does not exist; give the raylab-pending-*.json file the run printed.")
        uri = args.tracking_uri or json.loads(args.file.read_text())["tracking_uri"]
        sent = Tracker(uri).upload(args.file)
    except UserError as e:
        print(f"raylab: error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"raylab: sent {sent} write(s) to {uri}")
    args.file.rename(args.file.with_suffix(".sent"))
    return 0
