"""What becomes of the trials' checkpoints (`--keep-checkpoints`): they serve restarts while a trial runs and
`--resume` after an interruption; once a trial has FINISHED they are only disk, hundreds of MB for a large model.

Each trial checkpoints into a Ray Train run of its own under --storage (`raylab-<run id>`), or into its warm
group's (`raylab-group-<first run id>`, raylab/driver/groups.py), which holds the last checkpoint of whichever of
its trials took one last. With `none` (the default) a run's directory goes as soon as every trial that used it
has FINISHED: a cold trial's at its end, a group's when the group ends; a failed or killed trial's stays for
`--resume`. `last` and `all` keep them. At the end the invocation says what is kept, where, and its size.
"""

from __future__ import annotations

import os
from collections import defaultdict


def location(storage: str | None) -> str:
    """The storage root as a path or URI pyarrow understands (~ expanded)."""
    return os.path.expanduser(storage or "~/ray_results")


def _fs(storage: str | None):
    import pyarrow.fs

    return (
        pyarrow.fs.FileSystem.from_uri(location(storage))
        if "://" in location(storage)
        else (pyarrow.fs.LocalFileSystem(), location(storage))
    )


def size_mb(storage: str | None, run: str) -> float:
    """The size of one Ray Train run's directory (its checkpoints and Ray Train's files), 0 where it is gone."""
    import pyarrow.fs

    fs, root = _fs(storage)
    infos = fs.get_file_info(pyarrow.fs.FileSelector(f"{root}/{run}", recursive=True, allow_not_found=True))
    return sum(i.size or 0 for i in infos if i.type == pyarrow.fs.FileType.File) / 2**20


def exists(storage: str | None, run: str) -> bool:
    """Whether a Ray Train run's directory is there (a trial that failed before it started made none)."""
    import pyarrow.fs

    fs, root = _fs(storage)
    return fs.get_file_info(f"{root}/{run}").type != pyarrow.fs.FileType.NotFound


def remove(storage: str | None, run: str) -> None:
    fs, root = _fs(storage)
    if exists(storage, run):
        fs.delete_dir(f"{root}/{run}")


class Kept:
    """The invocation's Ray Train runs, by name, with the statuses of the trials that used them."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.runs: dict[str, list[str]] = defaultdict(list)
        self.removed: set[str] = set()

    def ended(self, run: str, status: str, still_used: bool = False) -> None:
        """A trial that used Ray Train run `run` ended with `status`; `still_used`: its warm group goes on."""
        self.runs[run].append(status)
        if not still_used:
            self.release(run)

    def release(self, run: str) -> None:
        """No trial will use `run` again: with --keep-checkpoints none, it goes if all its trials FINISHED."""
        statuses = self.runs.get(run)
        if self.cfg.keep_checkpoints == "none" and statuses and all(s == "FINISHED" for s in statuses):
            try:
                remove(self.cfg.storage, run)
                self.removed.add(run)
            except OSError as e:  # the disk is the user's: say so, never fail the invocation for it
                print(f"raylab: note: could not remove {location(self.cfg.storage)}/{run}: {e}", flush=True)

    def line(self) -> str | None:
        """What is kept where, and its size; None when no trial ran."""
        if not self.runs:
            return None
        kept = [r for r in self.runs if r not in self.removed and exists(self.cfg.storage, r)]
        where = location(self.cfg.storage)
        if not kept:
            return f"checkpoints: none kept ({where} holds none of this run's)"
        mb = sum(size_mb(self.cfg.storage, r) for r in kept)
        why = {
            "none": "their trials did not finish: --resume goes on from them",
            "last": "--keep-checkpoints last",
            "all": "--keep-checkpoints all",
        }[self.cfg.keep_checkpoints]
        listed = " ".join(f"{where}/{r}" for r in kept[:3]) + (" ..." if len(kept) > 3 else "")
        return f"checkpoints: {len(kept)} Ray Train run(s) kept in {where}, {mb:,.1f} MB ({why}): {listed}"
