"""One store for what raylab measured on this host and keeps: every probe's answers in one shape, in one file.

`~/.cache/raylab/kept.json` holds {"format": FORMAT, "answers": {probe: {key: entry}}}, an entry being
{"value": the probe's figures, "about": a line for people, "measured": when, "raylab": the version that measured it,
"identity": what it is valid for (raylab/probes/host.py identity(), or the part of it the probe depends on)}.
A probe keeps an answer with keep() and reads it back with read(), which returns it only where the identity it was
kept for is the one given now: another host, another raylab or framework version, is measured again, never misread.
A file of another format, or a damaged one, holds nothing (and the next keep() starts it afresh).

The probes that keep answers (PROBES): --compile best's races, `raylab floor`'s start-up floor, `raylab peak`'s
peaks. `raylab probes` lists what is kept with dates and clears one answer, one probe's, or all (probes_main).
Before this store each probe had a file of its own (LEGACY); those are not read (their answers are measured again
once) and `raylab probes clear` removes them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

FORMAT = 1
PATH = Path("~/.cache/raylab/kept.json")
# probe -> what its answers are, for people
PROBES = {
    "race": "--compile best: each framework's executions timed on a model (the trials train in the faster)",
    "floor": "raylab floor: the start-up a trial of no work takes here, per framework",
    "peak": "raylab peak: each framework's measured matrix-product rate, per device, precision and threads",
}
LEGACY = ("best-execution.json", "startup-floor.json", "peak.json")  # the files of each probe before this store


def _load(path: Path) -> dict:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return kept.get("answers", {}) if isinstance(kept, dict) and kept.get("format") == FORMAT else {}


def _write(path: Path, answers: dict) -> bool:
    """Written whole through a temporary file (a reader never sees half of it); False where it cannot be (a
    read-only HOME: the probe measures again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "answers": answers}, indent=1, default=str))
        tmp.replace(path)
        return True
    except OSError:
        return False


def where(path: Path | None = None) -> Path:
    return (path or PATH).expanduser()


def keep(probe: str, key: str, value, identity: dict, about: str = "", path: Path | None = None) -> bool:
    """Keeps `value` as `probe`'s answer for `key`, valid for `identity`; the time and raylab's version with it."""
    from raylab.probes.host import version

    if probe not in PROBES:
        raise ValueError(f"unknown probe {probe!r}: one of {', '.join(PROBES)}")
    path = where(path)
    answers = _load(path)
    answers.setdefault(probe, {})[key] = {
        "value": value,
        "about": about,
        "measured": time.strftime("%Y-%m-%d %H:%M:%S"),
        "raylab": version("raylab"),
        "identity": identity,
    }
    return _write(path, answers)


def _holds(entry, identity: dict | None) -> bool:
    """An entry, kept for `identity` where one is given (compared as the file holds it: through JSON)."""
    return isinstance(entry, dict) and (
        identity is None or entry.get("identity") == json.loads(json.dumps(identity, default=str))
    )


def read(probe: str, key: str, identity: dict, path: Path | None = None) -> dict | None:
    """The kept entry for (probe, key) where it was kept for `identity` (its "value", "measured", ...), else None."""
    entry = _load(where(path)).get(probe, {}).get(key)
    return entry if _holds(entry, identity) else None


def entries(
    probe: str | None = None, path: Path | None = None, identity: dict | None = None
) -> list[tuple[str, str, dict]]:
    """(probe, key, entry) of every kept answer (of `probe`; kept for `identity`, where given), oldest first."""
    found = [
        (p, k, e)
        for p, kept in _load(where(path)).items()
        if probe in (None, p)
        for k, e in kept.items()
        if _holds(e, identity)
    ]
    return sorted(found, key=lambda t: t[2].get("measured", ""))


def clear(probe: str | None = None, key: str | None = None, path: Path | None = None) -> int:
    """Forgets `probe`'s answer for `key` (a key's prefix will do), all of `probe`'s, or (no probe) every answer and
    the probes' files from before this store; the number of answers forgotten."""
    path = where(path)
    answers = _load(path)
    gone = 0
    for p in [p for p in answers if probe in (None, p)]:
        keys = [k for k in answers[p] if key is None or k.startswith(key)]
        for k in keys:
            del answers[p][k]
        gone += len(keys)
        if not answers[p]:
            del answers[p]
    if gone:
        _write(path, answers)
    if probe is None and key is None:
        for name in LEGACY:
            (path.parent / name).unlink(missing_ok=True)
    return gone
