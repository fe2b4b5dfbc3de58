"""A raylab driver that holds at one named phase of its start-up until told to go on: what
tests/e2e/test_interrupt_startup.py stops it at. The phase is RAYLAB_TEST_PHASE, the gate directory
RAYLAB_TEST_PHASE_GATE: at the phase the driver writes GATE/at (the phase) and waits for GATE/go; the test sends its
signal while it waits, then lets it go on (a handler that deferred the stop acts when the phase ends).

- `import`: before Python has imported raylab (no handler of raylab's yet);
- `store`: as the MLflow store opens (a sqlite store opens in a thread while Ray starts: raylab/cli/session.py);
- `ray`: inside `ray.init`, Ray's processes started and the driver not yet connected to them;
- `trial`: the first trial's worker group starting, its torch model held as it is built (tests/held_recipe.py's
  hold, in the Ray Train worker; the gate's held-1 and release-1).

The command line is the held recipe's (tests/held_recipe.py, recipes/fashion.py's task); raylab itself has no hook.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PHASE = os.environ["RAYLAB_TEST_PHASE"]
GATE = Path(os.environ["RAYLAB_TEST_PHASE_GATE"])


def hold(name: str) -> None:
    if name == PHASE:
        (GATE / "at").write_text(name)
        while not (GATE / "go").exists():
            time.sleep(0.05)


hold("import")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import ray._private.worker as ray_worker  # noqa: E402 - after the first phase

from raylab.record import tracking  # noqa: E402

_connect, _open = ray_worker.connect, tracking.Tracker.__init__


def held_connect(*args, **kwargs):
    hold("ray")
    return _connect(*args, **kwargs)


def held_open(self, *args, **kwargs):
    hold("store")
    _open(self, *args, **kwargs)


ray_worker.connect, tracking.Tracker.__init__ = held_connect, held_open

from tests.held_recipe import recipe  # noqa: E402
from raylab import main  # noqa: E402

if __name__ == "__main__":
    trial = PHASE == "trial"
    main(recipe(gate=str(GATE) if trial else None, at_build=trial))
