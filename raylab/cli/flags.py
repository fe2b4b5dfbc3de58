"""Flag types and the argument groups a recipe's command line and a step benchmark's share.

Each group is added by its own small function; a flag both command lines take is defined once, here,
with only the noun that differs (a replica trains, a step-benchmark trial times one operation) passed in.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from raylab.config import PRECISIONS


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None


def concurrency(text: str) -> int | None:
    """--concurrency: a positive count, or 'auto' (None: as many trials as the cluster's nodes allow)."""
    if text == "auto":
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"'{text}' is not a positive number of trials or 'auto'")


def parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    """A recipe file's parser: its docstring (the commands that run it) as the description, kept as written."""
    return argparse.ArgumentParser(
        prog=f"python recipes/{name}.py",
        description=textwrap.dedent(doc or "").strip() or None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


class Renamed(argparse.Action):
    """A flag's old name, kept for a release: sets what the new one sets (a switch: True) and says the new name once,
    as a DeprecationWarning and on stderr."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        import sys
        import warnings

        message = f"{option_string} is now {self.new}; the old name goes in 0.4.0"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        print(f"raylab: note: {message}", file=sys.stderr)
        setattr(namespace, self.dest, True if values == [] else values)


def add_repeats(group) -> None:
    group.add_argument(
        "--repeats",
        type=integer,
        default=1,
        metavar="N",
        help="run every trial N times, interleaved (A B B A ...), each its own MLflow run; the "
        "comparison shows medians, the min..max range and which differences are significant "
        "(default: %(default)s)",
    )


def add_seed(group, what: str, default: int, set_key: bool = False) -> None:
    """--seed; with `set_key` the recipe's `--set seed=N` is the default and this flag wins over it."""
    default_text = f"{default}, or --set seed=N; this flag wins over --set" if set_key else str(default)
    group.add_argument(
        "--seed", type=integer, default=None if set_key else default, help=f"{what} (default: {default_text})"
    )


def add_precision(group, applied_where: str, default: str, set_key: bool = False) -> None:
    """--precision; with `set_key` the recipe's `--set precision=...` is the default and this flag wins over it."""
    default_text = f"{default}, or --set precision=...; this flag wins over --set" if set_key else default
    group.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        default=None if set_key else default,
        help=f"asked-for precision, applied {applied_where}; the applied one is "
        f"recorded as precision_applied (default: {default_text})",
    )


def add_where(group, unit: str, sweep: bool = False) -> None:
    """Where to run: the Ray cluster, the device and threads each `unit` (a replica, a trial) gets; sweep: --device
    takes a list, and --accelerator-type (the hardware axis: raylab/cli/expand.py parse_hardware)."""
    group.add_argument(
        "--address",
        default=None,
        help="Ray cluster address (default: $RAY_ADDRESS, else a new in-process local cluster)",
    )
    if not sweep:
        group.add_argument(
            "--device",
            choices=["cpu", "gpu"],
            default="cpu",
            help=f"what each {unit} runs on; gpu gives each {unit} one of the cluster's GPUs (default: cpu)",
        )
    else:
        group.add_argument(
            "--device",
            default="cpu",
            metavar="DEVICE[,DEVICE...]",
            help=f"what each {unit} runs on: cpu, gpu (one of the cluster's GPUs per {unit}), or a "
            "comma-separated list, each trial run on each (the hardware axis: cpu,gpu); "
            "DEVICE:TYPE also asks for nodes of that Ray accelerator type (gpu:H100, cpu:T4) "
            "(default: cpu)",
        )
        group.add_argument(
            "--accelerator-type",
            default=None,
            metavar="TYPE[,TYPE...]",
            help="Ray accelerator types (the accelerator_type:TYPE resource: H100, A100-80G, TPU-V4, "
            "...) to run every --device item on, one trial each, on nodes of that type; the "
            "table, the parity report and --prices show the types (default: any node)",
        )
    group.add_argument(
        "--threads",
        type=integer,
        default=1,
        help=f"intra-op threads (and CPUs) per {unit}, set in every framework (TF's and torch's thread "
        "pools, XLA's CPU threads for jax and torch_xla) and recorded "
        "(default: %(default)s)",
    )


def add_recording(group, experiment: str) -> None:
    """Where the runs are recorded: the MLflow store and experiment, and the --json summary."""
    group.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the working directory)",
    )
    group.add_argument("--experiment", default=experiment, help="MLflow experiment name (default: %(default)s)")
    group.add_argument("--json", type=Path, default=None, metavar="PATH", help="write a machine-readable summary here")
