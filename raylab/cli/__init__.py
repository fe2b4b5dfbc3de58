"""Entry points: a recipe's own command line, a step benchmark's, and `raylab compare | upload | floor | peak | data |
probes`.

    flags.py         flag types and the argument groups both command lines share (where to run, recording)
    recipe_flags.py  a recipe's parser, group by group
    configure.py     parsed flags -> the edited recipe and its Settings (every mistake a UserError)
    run.py           recipe_main: at the door, then Ray, then the trials
    bench.py         a step benchmark's parser and bench_main
    session.py       what both share on the driver: connect, run to the end, the summary and comparison
    store.py         compare_main and upload_main (MLflow only, no Ray)
    data.py          `raylab data export`: a recipe's data as Parquet shards
    probes.py        `raylab probes`: what raylab measured on this host and keeps, listed or cleared
"""

from __future__ import annotations

import sys

from raylab.cli.bench import bench_main, bench_parser
from raylab.cli.configure import edited, make_config
from raylab.cli.recipe_flags import recipe_parser
from raylab.cli.run import recipe_main
from raylab.cli.session import connect, finish

__all__ = [
    "bench_main",
    "bench_parser",
    "connect",
    "edited",
    "finish",
    "main",
    "make_config",
    "recipe_main",
    "recipe_parser",
]


def main(argv: list[str] | None = None) -> int:
    """The `raylab` console command."""
    from raylab.cli.data import data_main
    from raylab.cli.probes import probes_main
    from raylab.cli.store import compare_main, upload_main
    from raylab.probes.floor import floor_main
    from raylab.probes.peak import peak_main

    argv = sys.argv[1:] if argv is None else argv
    commands = {
        "compare": compare_main,
        "upload": upload_main,
        "floor": floor_main,
        "peak": peak_main,
        "data": data_main,
        "probes": probes_main,
    }
    asked = not argv or argv[0] in ("-h", "--help")  # help goes to stdout; a wrong command's usage to stderr
    if asked or argv[0] not in commands:
        print(
            "usage: raylab compare --experiment NAME [--run ID] [--format table|csv|json]\n"
            "       raylab upload raylab-pending-XXXX.json   (writes kept while the MLflow server was away)\n"
            "       raylab floor [--rounds N]   (measure this machine's start-up floor; trials record it)\n"
            "       raylab peak [--threads N] [--device cpu|gpu]   (measure its matrix-product peak; trials record "
            "their utilization)\n"
            "       raylab data export RECIPE DIR   (a recipe's data as Parquet, to train on with --data DIR)\n"
            "       raylab probes [list | clear [race|floor|peak] [KEY]]   (what raylab measured here and keeps)\n\n"
            "Run trials with a recipe: python recipes/fashion.py --help",
            file=sys.stdout if asked else sys.stderr,
        )
        return 0 if asked else 2
    return commands[argv[0]](argv[1:])
