"""One store for what raylab measured on this host (raylab/probes/store.py) and `raylab probes`, which lists and
clears it."""

from __future__ import annotations

import json
import time

import pytest

from raylab.cli import main
from raylab.probes import store

HERE = {"host": "h", "raylab": "0.3.0+abc"}


@pytest.fixture()
def kept(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "PATH", tmp_path / "raylab" / "kept.json")
    return tmp_path / "raylab" / "kept.json"


def test_an_answer_is_read_back_only_for_the_identity_it_was_kept_for(kept):
    assert store.keep("race", "k1", {"candidates": {"eager": {"step_ms": 1.0}}}, HERE, "PyTorch, batch 32")
    entry = store.read("race", "k1", HERE)
    assert entry["value"] == {"candidates": {"eager": {"step_ms": 1.0}}} and entry["about"] == "PyTorch, batch 32"
    assert entry["measured"].startswith(time.strftime("%Y-%m-%d")) and entry["identity"] == HERE
    assert store.read("race", "k1", {**HERE, "raylab": "0.3.1"}) is None  # another raylab: measured again
    assert store.read("race", "k2", HERE) is None and store.read("floor", "k1", HERE) is None
    with pytest.raises(ValueError, match="unknown probe 'nope'"):
        store.keep("nope", "k", 1, HERE)


def test_a_file_of_another_format_or_damaged_holds_nothing_and_is_started_afresh(kept):
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps({"k1": {"candidates": {}, "when": "2026-11-30 10:00"}}))  # a race file's old shape
    assert store.read("race", "k1", HERE) is None and store.entries() == []
    kept.write_text("{not json")
    assert store.entries() == []
    store.keep("peak", "torch/cpu/fp32/1", {"tflops": 0.1}, HERE)
    assert json.loads(kept.read_text())["format"] == store.FORMAT and len(store.entries()) == 1


def test_raylab_probes_lists_what_is_kept_with_dates_and_clears_one_answer_one_probe_or_all(kept, capsys):
    assert main(["probes"]) == 0 and "nothing kept in" in capsys.readouterr().out
    store.keep("race", "abc123", {"candidates": {}}, HERE, "PyTorch, batch 32, fp32, cpu, 1 thread(s)")
    store.keep("race", "def456", {"candidates": {}}, HERE, "TensorFlow, batch 32")
    store.keep("floor", "startup", {"fit_entry_s": 5.0}, HERE, "Ray Train to a training function")
    store.keep("peak", "jax/cpu/fp32/1", {"tflops": 0.05}, HERE, "jax/cpu/fp32/1: 50.0 GFLOP/s")
    assert main(["probes", "list"]) == 0
    out = capsys.readouterr().out
    today = time.strftime("%Y-%m-%d")
    for probe, key, about in (
        ("race", "abc123", "PyTorch, batch 32"),
        ("floor", "startup", "Ray Train"),
        ("peak", "jax/cpu/fp32/1", "50.0 GFLOP/s"),
    ):
        assert any(
            line.startswith(probe) and key in line and today in line and about in line for line in out.splitlines()
        ), out
    assert main(["probes", "clear", "race", "abc"]) == 0 and "cleared 1 race answer(s)" in capsys.readouterr().out
    assert [k for _, k, _ in store.entries("race")] == ["def456"]
    assert main(["probes", "clear", "race"]) == 0 and store.entries("race") == [] and len(store.entries()) == 2
    (kept.parent / "best-execution.json").write_text("{}")  # a file from before the store
    assert (
        main(["probes", "clear"]) == 0 and store.entries() == [] and not (kept.parent / "best-execution.json").exists()
    )
    with pytest.raises(SystemExit) as bad:  # argparse: an unknown probe, its usage and exit 2
        main(["probes", "clear", "nope"])
    assert bad.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err
