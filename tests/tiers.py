"""The suite's two tiers, the full tier's slices and the budget each run is held to.

- **The default tier** (`scripts/test.sh`, what `.ci/run` runs first): every capability the README and docs show,
  proven once (docs/testing.md's table says which test proves which), in at most DEFAULT's seconds of pytest and
  Ray Train start-ups on the 2-core machine.
- **The full tier** (`scripts/test.sh --full`: the default tier, then each slice in its own pytest): everything.
  A test file that only the full tier runs says so at module level: `TIER = "full"`. A file is in one tier, whole:
  its module-scoped shared runs are paid once, and its declarations below hold in whichever run it is part of.
- **Slices** (`scripts/test.sh --full --slice I/K`): the full-only files cut into K slices of about equal declared
  seconds (the longest first, each to the lightest slice), files that share a package-scoped run (a fixture such
  as `lost_workers`, set up once for every file that reads it) kept in one slice. The cut is kept in
  tests/slices.txt (a file keeps its slice when declarations change; new files go to the lightest), rebalanced only
  on purpose (tests/pin_slices.py). `.ci/run` runs the default tier,
  then the slice `.ci/slice` names (`ci_slice`); each submission advances that file by one, so consecutive landings
  run consecutive slices and every full-only test runs in CI once in any K landings in a row.

**Declared, then held.** Each test file declares `RAY_TRAIN_STARTS = N` (tests/startups.py) and `SECONDS = S`, its
time on this machine, measured (its tests' set-up, call and tear-down, the shared runs it sets up included); the
unit files declare theirs together in tests/unit/__init__.py. A shared run declares its start-ups and seconds where
it is made (tests/integration/conftest.py `shared_run`). The run ends with a table: each file and shared run, its
declared and used seconds and start-ups, and the run's totals against its budget. Start-ups over a declaration or
over the tier's total fail the run (start-ups do not vary from run to run, except where a search decides them: such
a file is held to what its runs were read to need, tests/startups.py); seconds over 1.5x a declaration are
listed as over, not failed (these machines are noisy).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OVER = 1.5  # seconds beyond this many times a declaration are listed as over


@dataclass(frozen=True)
class Budget:
    starts: int  # Ray Train start-ups in all: more fails the run
    seconds: float  # seconds of pytest in all: more is listed as over


DEFAULT = Budget(starts=45, seconds=25 * 60)
SLICES = 6  # K: .ci/run's slice of the full-only tests (about 95 minutes of them on 2026-11-29: 15.5-18 a slice;
# 68 min on 2026-12-01 on the Intel Xeon VM, 9.8-13.2 a slice, the default tier 17.0: docs/testing.md)
# one slice, so that set-up (about 6 minutes) + the default tier (23) + a slice fit in 50 minutes. The largest unit
# that cannot be cut is `lost_workers` with the files that read it (test_fault_tolerance.py, test_stream.py: about
# 18 minutes); tf:ps's lost tasks (`lost_tf_ps`) are read by test_ps.py alone, so they can go to another slice.
SLICE = Budget(starts=60, seconds=19 * 60)
GROUPED = ("tests/unit/",)  # reported (and declared, in the package's __init__.py) as one row
UNKNOWN_S = 60.0  # the weight of a file that declares no seconds, when slicing


def owner_of(path: str) -> str:
    """The row a test file's time and start-ups go to: the file, or its group."""
    return next((g for g in GROUPED if path.startswith(g)), path)


TIERS = ("default", "full")


def tier_of(item) -> str:
    """A test's tier: its module's TIER, "default" where it says none; any other value is refused (a test in no
    tier would run nowhere)."""
    module = getattr(item, "module", None)
    tier = getattr(module, "TIER", "default")
    if tier not in TIERS:
        raise ValueError(f"{item.nodeid.split('::')[0]}: TIER = {tier!r}; a test file's tier is one of {TIERS}")
    return tier


def select(items, full: bool, slice_: tuple[int, int] | None) -> list:
    """The items a run keeps: the default tier's; with `full`, every one; with a slice (I, K) too, the full-only
    files of slice I of K (tests/conftest.py applies it; tests/unit/test_partition.py checks it partitions)."""
    if not full:
        return [i for i in items if tier_of(i) == "default"]
    if slice_ is None:
        return list(items)
    i, k = slice_
    only = [item for item in items if tier_of(item) == "full"]
    where = slices(only, k)
    return [item for item in only if where[item.nodeid.split("::")[0]] == i]


def declared_seconds(item) -> float | None:
    path = item.nodeid.split("::")[0]
    group = next((g for g in GROUPED if path.startswith(g)), None)
    if group is not None:
        package = getattr(item.module, "__package__", None) if getattr(item, "module", None) else None
        return getattr(sys.modules.get(package or ""), "SECONDS", None)
    return getattr(getattr(item, "module", None), "SECONDS", None)


def parse_slice(text: str) -> tuple[int, int]:
    """'I/K' -> (I, K), 1 <= I <= K; a ValueError that says what is wanted."""
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"--slice wants I/K (slice I of K, e.g. 2/{SLICES}), got {text!r}") from None
    if not 1 <= i <= k:
        raise ValueError(f"--slice {text}: I must be between 1 and K")
    return i, k


def ci_slice(k: int = SLICES, root: Path = ROOT) -> int:
    """The slice .ci/run runs: the one .ci/slice names ("I/K", or "I"), which each submission advances by one, so
    consecutive landings run consecutive slices; wrapped into 1..K (the file's 7/6 is slice 1 of 6)."""
    text = (root / ".ci" / "slice").read_text().strip()
    try:
        n = int(text.split("/")[0])
    except ValueError:
        raise ValueError(f".ci/slice holds {text!r}; it names the slice CI runs as I/K (e.g. 3/{k})") from None
    return (n - 1) % k + 1


def package_runs(item) -> set[str]:
    """The package-scoped fixtures an item asks for, clusters aside: runs shared across files."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    out = set()
    for name, defs in info.name2fixturedefs.items():
        if defs and defs[-1].scope == "package" and not name.endswith("cluster"):
            out.add(name)
    return out


PINS = ROOT / "tests" / "slices.txt"  # each full-only file's slice, kept: "I path" lines under a "# K=6" line


def read_pins(k: int, path: Path = PINS) -> dict[str, int]:
    """{file: slice} as tests/slices.txt keeps them for K slices ({} where it keeps another K, or is missing)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    if not lines or lines[0].strip() != f"# K={k}":
        return {}
    return {
        path: int(i)
        for i, path in (line.split(None, 1) for line in lines[1:] if line.strip() and not line.startswith("#"))
    }


def write_pins(where: dict[str, int], k: int, path: Path = PINS) -> None:
    path.write_text(
        f"# K={k}\n# Each full-only test file's slice (tests/tiers.py slices): a file keeps it when "
        "declarations change; a new file goes to the lightest slice. Rebalanced only on purpose, in a "
        "commit that says so: .venv/bin/python -m tests.pin_slices\n"
        + "".join(f"{i} {p}\n" for p, i in sorted(where.items(), key=lambda t: (t[1], t[0])))
    )


def slices(items, k: int, pinned: dict[str, int] | None = None) -> dict[str, int]:
    """{test file: its slice, 1..k}: files sharing a package-scoped run together; a file tests/slices.txt pins
    (`pinned`; default: read_pins) keeps its slice, whatever its declaration says now, and the rest (new files) go,
    the longest first, each to the slice lightest by declared seconds."""
    pinned = read_pins(k) if pinned is None else pinned
    weight: dict[str, float] = {}
    runs: dict[str, set[str]] = defaultdict(set)
    for item in items:
        path = item.nodeid.split("::")[0]
        s = declared_seconds(item)
        weight[path] = UNKNOWN_S if s is None else float(s)
        runs[path] |= package_runs(item)
    # union the files that share a run
    parent = {p: p for p in weight}

    def find(p):
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    by_run: dict[str, str] = {}
    for path in sorted(weight):
        for run in sorted(runs[path]):
            if run in by_run:
                parent[find(path)] = find(by_run[run])
            else:
                by_run[run] = path
    units: dict[str, list[str]] = defaultdict(list)
    for path in sorted(weight):
        units[find(path)].append(path)
    load = [0.0] * k
    out = {}
    free = []
    for root, members in units.items():
        kept = sorted(pinned[p] for p in members if 1 <= pinned.get(p, 0) <= k)
        if not kept:
            free.append(root)
            continue
        load[kept[0] - 1] += sum(weight[p] for p in members)  # a run shared: where its first pinned file is
        out.update({p: kept[0] for p in members})
    for root in sorted(free, key=lambda r: (-sum(weight[p] for p in units[r]), r)):
        i = min(range(k), key=lambda j: (load[j], j))
        load[i] += sum(weight[p] for p in units[root])
        for p in units[root]:
            out[p] = i + 1
    return out


class Ledger:
    """Seconds used per row (a file, a group of files, a shared run), from pytest's reports and the shared runs."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.declared: dict[str, float] = {}
        self.started = time.monotonic()
        self.ended: float | None = None

    def add_report(self, report) -> None:
        self.seconds[owner_of(report.nodeid.split("::")[0])] += report.duration

    def add_run(self, name: str, seconds: float, declared: float | None) -> None:
        self.seconds[f"run:{name}"] += seconds
        if declared is not None:
            self.declared[f"run:{name}"] = declared

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started


LEDGER: Ledger | None = None  # made by tests/conftest.py for the session


def table(
    ledger: Ledger,
    starts: dict[str, int],
    declared_starts: dict[str, int],
    budget: Budget | None,
    what: str,
    needed: dict[str, int] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """(lines of the budget table, rows over on seconds, failures: start-ups over a declaration or the total).
    `needed`: for a file whose start-ups a search decides, what its runs were read to need (tests/startups.py): its
    row shows that beside the most it declares ("11 of 12"), and is held to it."""
    needed = needed or {}
    rows = sorted(set(ledger.seconds) | set(starts) | {r for r in ledger.declared if r in ledger.seconds})
    lines = [f"{'file or shared run':58s} {'seconds':>8s} {'declared':>8s} {'starts':>6s} {'declared':>8s}"]
    over, failed = [], []
    for row in rows:
        used, dec = ledger.seconds.get(row, 0.0), ledger.declared.get(row)
        n, dn = starts.get(row, 0), declared_starts.get(row)
        shown = "-" if dn is None else str(dn)
        if row in needed:  # a search's start-ups: held to what its runs needed, the declaration their bound
            dn, shown = needed[row], f"{needed[row]} of {dn}"
        flag = ""
        if dec is not None and used > OVER * dec:
            flag = f"  OVER: {used:.0f} s > {OVER} x {dec:.0f}"
            over.append(f"{row}: {used:.0f} s, declares {dec:.0f}")
        if n > (dn or 0):
            flag += f"  OVER: {n} start-ups, " + (
                f"its runs needed {dn}" if row in needed else f"declares {dn or 'none'}"
            )
        lines.append(f"{row[:58]:58s} {used:8.0f} {'-' if dec is None else f'{dec:.0f}':>8s} {n:6d} {shown:>8}{flag}")
    # shared runs are inside their files' seconds: the total counts files only
    total_s = sum(v for r, v in ledger.seconds.items() if not r.startswith("run:"))
    total_n = sum(starts.values())
    lines.append(
        f"{'in all (' + what + ')':58s} {total_s:8.0f} {'' if budget is None else budget.seconds:>8} "
        f"{total_n:6d} {'' if budget is None else budget.starts:>8}"
    )
    lines.append(f"pytest's wall time: {ledger.elapsed():.0f} s ({ledger.elapsed() / 60:.1f} min)")
    if budget is not None:
        if ledger.elapsed() > budget.seconds:
            over.append(f"the run: {ledger.elapsed():.0f} s of pytest, its budget {budget.seconds:.0f}")
        if total_n > budget.starts:
            failed.append(f"the run: {total_n} Ray Train start-ups, its budget {budget.starts}")
    return lines, over, failed
