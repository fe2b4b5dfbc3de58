"""`raylab probes`: what raylab measured on this host and keeps (raylab/probes/store.py), listed or cleared."""

from __future__ import annotations

import argparse
import sys


def probes_main(argv: list[str]) -> int:
    from raylab.probes import store

    p = argparse.ArgumentParser(
        prog="raylab probes",
        description="What raylab measured on this host and keeps, so that the next run reads it instead of measuring "
        "again: " + "; ".join(store.PROBES.values()) + f". Kept in {store.PATH}.",
    )
    sub = p.add_subparsers(dest="action")
    shown = sub.add_parser("list", help="every kept answer with the date it was measured (the default)")
    shown.add_argument("probe", nargs="?", choices=list(store.PROBES), help="only this probe's answers")
    gone = sub.add_parser(
        "clear", help="forget answers: the next run (or `raylab floor`, `raylab peak`) measures them again"
    )
    gone.add_argument("probe", nargs="?", choices=list(store.PROBES), help="only this probe's (default: every one)")
    gone.add_argument("key", nargs="?", help="only this answer: its key as `list` shows it (a prefix will do)")
    args = p.parse_args(argv)
    if args.action == "clear":
        n = store.clear(args.probe, args.key)
        what = f"{args.probe} answer(s)" if args.probe else "answer(s)"
        print(
            f"raylab probes: cleared {n} {what}"
            + (f" for key {args.key}" if args.key else "")
            + f" from {store.where()}"
        )
        return 0
    found = store.entries(getattr(args, "probe", None))
    if not found:
        print(
            f"raylab probes: nothing kept in {store.where()} (a run with --compile best, `raylab floor` or "
            "`raylab peak` keeps what it measures)"
        )
        return 0
    print(f"kept in {store.where()}:")
    print(f"{'probe':<6} {'key':<24} {'measured':<19} {'raylab':<12} what")
    for probe, key, entry in found:
        print(
            f"{probe:<6} {key[:24]:<24} {entry.get('measured', '?'):<19} {str(entry.get('raylab')):<12} "
            f"{entry.get('about', '')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(probes_main(sys.argv[1:]))
