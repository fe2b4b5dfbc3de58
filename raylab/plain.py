"""Moved to raylab.frameworks.plain (deprecated; goes in raylab 0.3.0): `python -m raylab.plain SPEC.json` still runs
it, with a DeprecationWarning."""

import importlib
import runpy
import sys

from raylab._moved import REMOVED_IN, warn_moved

NEW = "raylab.frameworks.plain"

if __name__ == "__main__":
    warn_moved(
        "raylab.plain",
        NEW,
        f"python -m raylab.plain is deprecated; run python -m {NEW} instead (raylab.plain goes in raylab {REMOVED_IN})",
    )
    runpy.run_module(NEW, run_name="__main__", alter_sys=True)
else:
    warn_moved("raylab.plain", NEW)
    sys.modules[__name__] = importlib.import_module(NEW)
