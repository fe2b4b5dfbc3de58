"""bench/gpu.sh, the GPU acceptance run, kept runnable between GPU loans (a session is lent a GPU for a few minutes,
now and then): a change that breaks one of its steps fails here, not on the next GPU.

- Every step's command line, in the GPU's form and in the CPU rehearsal's (`DRY=1`), goes through raylab's own
  door: the recipe's parser, the checked configuration and the data with its task checked, all that runs before
  Ray starts (raylab/cli/run.py `_at_the_door`, less the connection). The script runs for real with PYTHON
  standing for a recorder of what it would run; what runs Python itself (`-c`, `-m`: the machine's facts, the
  Parquet export the streamed step reads) runs.
- The facts step runs for real in both (it is Python's own `-c`): what the machine is, in facts.log.
  No recipe runs: torch fp16 and the rest are the integration tests' (the trials each step runs are theirs).

The whole rehearsal, every step on this CPU, is `DRY=1 bash bench/gpu.sh OUT` (about 22 minutes here: more than the
suite's time allows; bench/README.md).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.door import at_the_door, load_module

pytestmark = pytest.mark.e2e
RAY_TRAIN_STARTS = 0  # no step trains: each stops at the door
SECONDS = 30  # 20 s on 2026-12-06 (the default tier, the 2-core VM)

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
# The GPU cells of docs/hardware.md that torch and JAX can run, a step each (stream exports its Parquet first).
CELLS = [
    "facts",
    "mlp",
    "axis",
    "mlp_bf16",
    "mlp_fp16",
    "cnn",
    "cnn_bf16",
    "cnn_fp16",
    "compile",
    "best",
    "profile",
    "stream",
    "restart",
    "batch_max",
]
# What each step must ask for: the cell it stands for.
ASKS = {
    "mlp": ["--repeats 2"],
    "axis": ["--device cpu"],
    "axis_peak": ["peak", "--device cpu"],
    "axis_peak_gpu": ["peak", "--device gpu"],
    "mlp_bf16": ["--precision bf16"],
    "mlp_fp16": ["--precision fp16"],
    "cnn": ["fashion_cnn.py"],
    "cnn_bf16": ["--precision bf16"],
    "cnn_fp16": ["--precision fp16"],
    "compile": ["--compile on", "--compile-mode"],
    "best": ["--compile best", "--race-again"],
    "profile": ["--profile"],
    "stream": ["--data"],
    "restart": ["restart.py"],
    "batch_max": ["--batch max"],
}


def script_env(home: Path, **more) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DRY", "STEPS")}
    return {**env, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0", **more}


def recorded(tmp_path: Path, dry: bool) -> dict[str, list[str]]:
    """{step: the command line it runs}, from the script run with PYTHON recording instead of running."""
    log, out = tmp_path / f"argv-{dry}.jsonl", tmp_path / f"out-{dry}"
    recorder = tmp_path / f"python-{dry}"
    recorder.write_text(f"""#!/bin/sh
case "$1" in -c) exec {PYTHON} "$@";; -m) [ "$2 $3" = "raylab peak" ] || exec {PYTHON} "$@";; esac
exec {PYTHON} -c 'import json, sys; open(sys.argv[1], "a").write(json.dumps(sys.argv[2:]) + "\\n")' {log} "$@"
""")
    recorder.chmod(0o755)
    env = script_env(tmp_path, PYTHON=str(recorder), **({"DRY": "1"} if dry else {}))
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    peaks = ["axis_peak"] + ([] if dry else ["axis_peak_gpu"])  # `raylab peak`, recorded, not run
    assert [s[0] for s in steps] == CELLS[:2] + peaks + CELLS[2:11] + [
        "stream_export",
        "stream",
        "restart",
        "batch_max",
    ]
    assert {s[0]: s[1] for s in steps if s[1] != "0"} == {}, done.stdout[-3000:]
    facts = (out / "facts.log").read_text()
    assert re.search(r"torch \S+ cuda \S+ jax \S+", facts) and re.search(r"^[0-9a-f]{40}$", facts, re.M), facts
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return dict(zip([s[0] for s in steps if s[0] not in ("facts", "stream_export")], lines, strict=True))


@pytest.mark.parametrize("dry", [False, True], ids=["on a GPU", "DRY=1"])
def test_every_step_of_the_gpu_run_passes_raylabs_door(tmp_path, dry):
    steps = recorded(tmp_path, dry)
    restart = load_module(ROOT / "bench" / "restart.py", "bench_restart")
    for name, argv in steps.items():
        line = shlex.join(argv)
        for ask in ASKS[name]:
            assert ask in line, (name, ask, line)
        if name.startswith("axis_peak"):  # raylab peak's own flags: each framework known, the device the step's
            assert argv[:3] == ["-m", "raylab", "peak"] and "--frameworks torch,jax" in line, line
            continue
        if name == "restart":
            a = restart.parser().parse_args(argv[1:])
            argv = restart.fashion_args(a.trial, 1, a.epochs, a.steps, a.device, f"sqlite:///{tmp_path}/r.db")
        cfg = at_the_door(argv)
        if name == "axis":  # the hardware axis: both devices in one invocation where there is a GPU
            assert cfg.hardware == (["cpu"] if dry else ["cpu", "gpu"]), line
            continue
        assert cfg.device == ("cpu" if dry else "gpu"), (name, line)
        if name == "compile" and not dry:  # CUDA graphs are accepted on a GPU only
            assert "reduce-overhead" in line
