"""Each capability's test, shown to fail when its feature breaks: a hand list of mutants, one or more for each row of
docs/testing.md's capability table, and the command that applies each to a scratch copy and runs its row's test.

A mutant is one exact text in one file of the repository replaced by another (the feature broken at that line), and
the default-tier test of its row that must then fail. `python -m tests.mutants` copies the repository's files (those
git tracks or would track) to a scratch directory once, with a virtual environment of its own that reuses this
checkout's packages and installs raylab editable from the copy (`overlay_venv`: so the copy's raylab is what every
process imports, pytest, the recipes it runs as subprocesses, their Ray workers, a README user's shell), then for
each mutant writes the change there, runs its test with the copy's python, and puts the file back. It passes only
when every mutant was caught: its text found exactly once and its test failed. A mutant whose text is no longer in
its file is reported stale (the code moved on: update the mutant), and fails the command too.

    python -m tests.mutants                  # every mutant (about 30 minutes here)
    python -m tests.mutants --only seconds   # mutants whose name has `seconds`
    python -m tests.mutants --group quick    # one group's (GROUPS)
    python -m tests.mutants --list           # the table: name, row, file, test
    python -m tests.mutants --check          # each mutant's text still in its file once (a unit test checks it)

The full tier runs them, a group a file (tests/e2e/test_mutants_GROUP.py), so that each fits a slice.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str  # short, unique
    row: str  # the capability table's row it breaks (the start of its text)
    path: str  # the file, from the repository's root
    old: str  # the exact text, found once in the file
    new: str  # what it becomes
    test: str  # the row's default-tier test (a pytest node id) that must fail
    group: str = "quick"  # which full-tier file runs it: GROUPS


GROUPS = ("quick", "trials", "matrix", "walk")  # tests/e2e/test_mutants_GROUP.py each
MUTANTS: list[Mutant] = []  # filled below, row by row


def scratch_copy(dest: Path) -> Path:
    """The repository's files as git sees them (tracked, and untracked but not ignored) copied under `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    (dest / ".git").symlink_to(ROOT / ".git")  # bench/gpu.sh's rehearsal reads the commit
    overlay_venv(ROOT / ".venv", dest / ".venv", dest)
    return dest


def overlay_venv(base: Path, venv: Path, copy: Path) -> Path:
    """A virtual environment for the copy in a second: its own python, the base environment's packages (its site
    directory added, .pth files and all), and raylab installed editable from the copy, as scripts/setup.sh installs
    it from a checkout (its stamp copied, so setup.sh in the copy finds it ready). Every process started from it,
    with or without PYTHONPATH (the README's user strips it), runs the copy's raylab; the base is not touched."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    base_site = next(base.glob("lib/python*/site-packages"))
    (site / "_base_venv.pth").write_text(f"import site; site.addsitedir({str(base_site)!r})\n")
    for finder in base_site.glob("__editable___raylab_*_finder.py"):  # the editable install, pointed at the copy
        (site / finder.name).write_text(finder.read_text().replace(str(ROOT / "raylab"), str(copy / "raylab")))
        pth = next(base_site.glob("__editable__.raylab-*.pth"))
        (site / ("0" + pth.name)).write_text(pth.read_text())  # before the base's: its finder maps raylab first
    if (base / ".raylab-setup").exists():
        shutil.copy2(base / ".raylab-setup", venv / ".raylab-setup")
    shebang = f"#!{base / 'bin' / 'python'}".encode()
    for script in (base / "bin").iterdir():  # console scripts (raylab, ray, mlflow): the copy's python runs them
        target = venv / "bin" / script.name
        if target.exists() or target.is_symlink():
            continue
        head = script.read_bytes()[:200] if script.is_file() else b""
        if head.startswith(shebang):
            target.write_bytes(script.read_bytes().replace(shebang, f"#!{venv / 'bin' / 'python'}".encode(), 1))
            target.chmod(0o755)
        else:
            target.symlink_to(script)
    return venv


def env_for(copy: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(
        [str(copy / ".venv" / "bin")] + [p for p in env["PATH"].split(os.pathsep) if p != str(ROOT / ".venv" / "bin")]
    )
    return env


def check_copy(copy: Path) -> None:
    """The copy's raylab is what a process started with its environment imports (not the editable install's)."""
    python = str(copy / ".venv" / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import raylab; print(raylab.__file__)"],
        cwd="/",
        env=env_for(copy),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not where.startswith(str(copy)):
        raise SystemExit(f"the scratch copy's raylab is not what runs ({where}); the mutants would test the original")


def stale(m: Mutant, root: Path = ROOT) -> str | None:
    """Why the mutant cannot be applied (its text not in its file exactly once), or None."""
    try:
        found = (root / m.path).read_text().count(m.old)
    except OSError as e:
        return f"STALE: {m.path}: {e.strerror}"
    return None if found == 1 else f"STALE: its text is in {m.path} {found} times, not once"


def run_one(m: Mutant, copy: Path, log) -> tuple[str, float]:
    """('caught' | 'MISSED' | 'STALE: why', seconds): the mutant applied, its test run, the file put back."""
    if why := stale(m, copy):
        return why, 0.0
    target = copy / m.path
    text = target.read_text()
    began = time.monotonic()
    target.write_text(text.replace(m.old, m.new))
    limit = time_limit(m, copy)
    cmd = [str(copy / ".venv" / "bin" / "python"), "-m", "pytest", m.test, "-x", "-q", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(
        cmd, cwd=copy, env=env_for(copy), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:  # a test that waits for ever fails the suite too: caught, and said so
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return f"caught (hung: killed after {limit:.0f} s)", time.monotonic() - began
    finally:
        target.write_text(text)
    # pytest's 1: a test failed (caught); 0: all passed (missed); anything else (no test collected, an error of
    # pytest's own) is not a catch either
    return (
        "caught" if code == 1 else "MISSED" if code == 0 else f"MISSED (pytest exited {code})"
    ), time.monotonic() - began


def time_limit(m: Mutant, copy: Path) -> float:
    """How long a mutant's test may take: three times what its file declares (tests/tiers.py), at least 3 minutes."""
    import re

    path = copy / m.test.split("::")[0]
    source = path.read_text() if not m.test.startswith("tests/unit/") else (path.parent / "__init__.py").read_text()
    declared = re.search(r"^SECONDS = (\d+)", source, re.M)
    return max(180.0, 3 * float(declared.group(1)) if declared else 0.0)


def run(mutants: list[Mutant], keep: Path | None = None) -> list[tuple[Mutant, str, float]]:
    """Runs each mutant against its test in one scratch copy; its pytest output goes to the copy's mutants/NAME.log."""
    where = Path(tempfile.mkdtemp(prefix="raylab-mutants-")) if keep is None else keep
    copy = scratch_copy(where / "repo")
    check_copy(copy)
    (where / "logs").mkdir(exist_ok=True)
    results = []
    try:
        for m in mutants:
            with (where / "logs" / f"{m.name}.log").open("w") as log:
                outcome, secs = run_one(m, copy, log)
            print(f"{m.name:28s} {outcome:10s} {secs:6.0f} s  {m.test}", flush=True)
            results.append((m, outcome, secs))
    finally:
        if keep is None and all(r[1].startswith("caught") for r in results):
            shutil.rmtree(where, ignore_errors=True)
        else:
            print(f"logs: {where / 'logs'}", flush=True)
    return results


def assert_caught(group: str) -> None:
    """The full tier's check of one group (tests/e2e/test_mutants_GROUP.py): every mutant caught, none stale."""
    results = run([m for m in MUTANTS if m.group == group])
    missed = [f"{m.name}: {outcome} ({m.test})" for m, outcome, _ in results if not outcome.startswith("caught")]
    assert results and not missed, "\n".join(missed)


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="run the mutants whose name contains this (or any of A,B,...)")
    p.add_argument("--group", choices=GROUPS, help="run one group's mutants")
    p.add_argument("--check", action="store_true", help="only check that each mutant's text is in its file once")
    p.add_argument("--list", action="store_true", help="print the list and run nothing")
    p.add_argument("--keep", type=Path, help="keep the scratch copy and logs here")
    return p.parse_args(argv)


def chosen(args) -> list[Mutant]:
    names = args.only.split(",")
    return [m for m in MUTANTS if any(n in m.name for n in names) and (args.group is None or m.group == args.group)]


def main(argv=None) -> int:
    args = parse(argv)
    mutants = chosen(args)
    if args.check:
        problems = [f"{m.name}: {why}" for m in mutants if (why := stale(m))]
        print("\n".join(problems) or f"{len(mutants)} mutants, each text in its file once")
        return 1 if problems else 0
    if args.list:
        for m in mutants:
            print(f"{m.name:28s} {m.group:7s} {m.path}  ->  {m.test}\n    row: {m.row}")
        return 0
    if not mutants:
        print("no mutant matches", file=sys.stderr)
        return 2
    began = time.monotonic()
    results = run(mutants, args.keep)
    caught = sum(r[1].startswith("caught") for r in results)
    print(f"{caught} of {len(results)} mutants caught in {(time.monotonic() - began) / 60:.1f} min")
    return 0 if caught == len(results) else 1


def mutant(name, row, path, old, new, test, group="quick") -> None:
    MUTANTS.append(Mutant(name, row, path, old, new, test, group))


from tests.mutant_list import define  # noqa: E402 - the list, row by row, after the harness it uses

define(mutant)

if __name__ == "__main__":
    sys.exit(main())
