"""What becomes of checkpoints (raylab/driver/retention.py, --keep-checkpoints) and the room a checkpoint needs
(raylab/loop/checkpoint.py room_for), on real directories."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from raylab.driver.retention import Kept, size_mb
from raylab.loop import checkpoint


def fill(root, run: str, mb: float) -> None:
    d = root / run / "checkpoint_000000"
    d.mkdir(parents=True)
    (d / "model.bin").write_bytes(b"\0" * int(mb * 2**20))


def test_none_removes_a_run_once_every_trial_that_used_it_finished(tmp_path, capsys):
    cfg = SimpleNamespace(keep_checkpoints="none", storage=str(tmp_path))
    for run in ("raylab-a", "raylab-b", "raylab-group-c"):
        fill(tmp_path, run, 1)
    kept = Kept(cfg)
    kept.ended("raylab-a", "FINISHED")  # a cold trial: its own run, gone at its end
    kept.ended("raylab-b", "KILLED")  # interrupted: --resume needs it
    kept.ended("raylab-group-c", "FINISHED", still_used=True)  # its group goes on
    assert not (tmp_path / "raylab-a").exists()
    assert (tmp_path / "raylab-group-c").exists()
    kept.ended("raylab-group-c", "FINISHED", still_used=True)
    kept.release("raylab-group-c")  # the group ended
    assert not (tmp_path / "raylab-group-c").exists() and (tmp_path / "raylab-b").exists()
    line = kept.line()
    assert line.startswith(f"checkpoints: 1 Ray Train run(s) kept in {tmp_path}, 1.0 MB (their trials did not finish")
    assert str(tmp_path / "raylab-b") in line


def test_last_and_all_keep_and_say_where_and_how_much(tmp_path):
    fill(tmp_path, "raylab-a", 2)
    fill(tmp_path, "raylab-b", 0.5)
    kept = Kept(SimpleNamespace(keep_checkpoints="last", storage=str(tmp_path)))
    kept.ended("raylab-a", "FINISHED")
    kept.ended("raylab-b", "FINISHED")
    assert (tmp_path / "raylab-a").exists() and size_mb(str(tmp_path), "raylab-a") == pytest.approx(2.0)
    assert "2 Ray Train run(s) kept" in kept.line() and "2.5 MB (--keep-checkpoints last)" in kept.line()
    assert Kept(SimpleNamespace(keep_checkpoints="none", storage=str(tmp_path))).line() is None  # no trial yet


def test_a_checkpoint_that_does_not_fit_is_named_before_it_is_written(tmp_path, monkeypatch):
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "state").write_bytes(np.zeros(3 * 2**20, np.uint8).tobytes())
    assert checkpoint.room_for(str(d), str(tmp_path / "not-yet" / "made")) == pytest.approx(3.0)
    assert checkpoint.room_for(str(d), "s3://bucket/runs") == pytest.approx(3.0)  # a URI's store: not looked at
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(checkpoint, "ROOM_MARGIN_MB", free / 2**20)  # this disk, as if it were that full
    with pytest.raises(
        checkpoint.NoRoomError,
        match=r"a checkpoint of 3 MB does not fit in .* MB free\); free some "
        r"space, point --storage elsewhere, or run with --max-failures 0",
    ):
        checkpoint.room_for(str(d), str(tmp_path))


def test_a_probe_evaluates_one_batch_of_the_test_split():
    from raylab.data.shard import evaluation

    seen = []
    data = SimpleNamespace(streamed=False, test=lambda: ({"a": np.arange(10), "b": np.arange(10)}, np.arange(10)))
    evaluate = evaluation(data, lambda x, y: seen.append((len(x["a"]), len(x["b"]), len(y))) or {})
    evaluate(4)
    evaluate()
    assert seen == [(4, 4, 4), (10, 10, 10)]


def test_a_trial_that_made_no_run_directory_is_not_counted_as_kept(tmp_path):
    kept = Kept(SimpleNamespace(keep_checkpoints="none", storage=str(tmp_path)))
    kept.ended("raylab-never-started", "FAILED")  # its --batch max search failed before Ray Train ran it
    assert kept.line() == f"checkpoints: none kept ({tmp_path} holds none of this run's)"
