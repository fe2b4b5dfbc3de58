"""Every command the README and the docs pages show passes raylab's door, in the default tier.

The commands' runs are tests of their own, many in the full tier (tests/e2e/test_readme.py runs the README's and
the marked docs blocks as written; docs/testing.md's table says where each capability is proven). Here each
`python ...`, `raylab ...` and `ray job submit ... -- python ...` line of every ```bash block of README.md and
docs/*.md goes through what it meets before Ray starts (tests/door.py): a recipe's parser, its checked configuration
and its data with the task checked; raylab's other commands' and the bench scripts' parsers. `raylab data export`
runs for real (the commands after it train on what it writes), into this test's own folder instead of /tmp. The
files the pages say to save (`<!-- readme-test: file NAME -->`) are saved first. No Ray cluster starts.
"""

from __future__ import annotations

import glob
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.door import at_the_door, load_module, parsed
from tests.e2e.test_readme import page_blocks

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 0  # nothing starts Ray
SECONDS = 12  # 9 s on 2026-12-07 (the default tier, the 2-core VM)

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", *sorted(str(Path(p).relative_to(ROOT)) for p in glob.glob(str(ROOT / "docs" / "*.md")))]
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
EXPORT_TO = "/tmp/fashion-parquet"  # where docs/data.md's export writes; here, under the test's folder


def commands() -> list[tuple[str, list[str]]]:
    """(page:line, argv) of every python or raylab command in the pages' bash blocks, in order."""
    out = []
    for page in PAGES:
        text = (ROOT / page).read_text()
        for block in BLOCK.finditer(text):
            first = text.count("\n", 0, block.start()) + 2
            body = re.sub(r"\\\n\s*", " ", block.group(1))
            for n, line in enumerate(body.splitlines()):
                argv = shlex.split(line, comments=True)
                if argv and argv[-1] == "&":
                    argv = argv[:-1]
                if argv and Path(argv[0]).name in ("python", "raylab") or argv[:3] == ["ray", "job", "submit"]:
                    out.append((f"{page}:{first + n}", argv))
    return out


COMMANDS = commands()


@pytest.fixture(scope="module")
def here(tmp_path_factory):
    """A folder with the checkout's recipes and bench, the files the pages say to save, and docs/data.md's export."""
    where = tmp_path_factory.mktemp("door")
    for name in ("recipes", "bench"):
        (where / name).symlink_to(ROOT / name)
    for page in PAGES:
        for name, body in page_blocks((ROOT / page).read_text(), every=True)[1].items():
            (where / name).write_text(body)
    [export] = [argv for _, argv in COMMANDS if argv[-2:] == ["recipes/fashion.py", EXPORT_TO]]
    done = subprocess.run(
        [sys.executable, *export[1:-1], str(where / "fashion-parquet")],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where


def test_the_pages_show_the_commands_a_user_runs():
    shown = [shlex.join(argv) for _, argv in COMMANDS]
    assert len(shown) >= 25, shown
    for wanted in (
        "recipes/fashion.py --quick",
        "raylab compare --experiment fashion",
        "my_recipe.py --quick",
        "my_regression.py --quick",
        "raylab data export",
        "ray job submit",
        "--precision bf16",
    ):
        assert any(wanted in line for line in shown), wanted


def recipe_argv(argv: list[str], where: Path) -> list[str] | None:
    """The recipe command inside argv (after `python`, or after a `--`), its paths made this folder's."""
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv or Path(argv[0]).name != "python" or len(argv) < 2 or not argv[1].endswith(".py"):
        return None
    return [str(where / argv[1]), *(a.replace(EXPORT_TO, str(where / "fashion-parquet")) for a in argv[2:])]


@pytest.mark.parametrize("where_shown, argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_the_pages_show_passes_raylabs_door(here, where_shown, argv, monkeypatch):
    monkeypatch.chdir(here)
    monkeypatch.setenv("HOME", str(here))
    if (
        argv[:3] == ["ray", "job", "submit"]
        or (len(argv) > 1 and argv[1].startswith("recipes/"))
        or (len(argv) > 1 and argv[1].endswith(".py") and not argv[1].startswith("bench/"))
    ):
        at_the_door(recipe_argv(argv, here))
        return
    if Path(argv[0]).name == "raylab" or argv[1:3] == ["-m", "raylab"]:
        rest = argv[1:] if Path(argv[0]).name == "raylab" else argv[3:]
        if rest[:2] == ["data", "export"]:  # it ran for real as `here` was made: the pages train on what it wrote
            assert (here / "fashion-parquet" / "raylab-data.json").exists()
            return
        from raylab.cli import main

        parsed(lambda: main(rest), rest)
        return
    assert argv[1].startswith("bench/"), f"{where_shown}: a command this test does not know how to check: {argv}"
    script = load_module(ROOT / argv[1], f"door_{Path(argv[1]).stem}")
    parsed(script.main, argv[2:])
    inner = recipe_argv(argv[2:], here)
    if inner:  # a bench script that runs a recipe's command line (after its `--`)
        at_the_door(inner)
