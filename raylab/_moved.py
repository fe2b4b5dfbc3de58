"""Old import paths of modules that moved, kept for one release (0.2.x) with a DeprecationWarning naming the new one.

`import raylab` installs `MovedFinder` on `sys.meta_path`: importing an old name (`import raylab.scenes`,
`from raylab import stream`) warns once, at the importing line, and binds the module at its new path, so
`raylab.stream is raylab.data.stream`. Old packages (`raylab.backends`) are empty modules of their own whose
submodules resolve the same way and warn (aliasing them to the new package would overwrite its attributes).
`python -m raylab.plain` is a file of its own (raylab/plain.py): running a module needs its code.
CHANGELOG.md lists every move; 0.1.0's and 0.2.0's go in 0.3.0, the later ones (HOUSE) in 0.4.0.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

REMOVED_IN = "0.3.0"  # 0.1.0's and 0.2.0's moves
REMOVED_IN_NEXT = "0.4.0"  # the moves since 0.2.0 (HOUSE below)

# old module -> new module (0.1.0's layout -> today's)
MOVED = {
    "raylab.stream": "raylab.data.stream",
    "raylab.scenes": "raylab.data.scenes",
    "raylab.shard": "raylab.data.shard",
    "raylab.stepbench": "raylab.driver.stepbench",
    "raylab.task.tf": "raylab.frameworks.tf.task",
    "raylab.task.torch": "raylab.frameworks.torch.task",
    "raylab.backends.tensorflow": "raylab.frameworks.tf.kinds",
    "raylab.backends.tf_worker": "raylab.frameworks.tf.worker",
    "raylab.backends.tf_ps": "raylab.frameworks.tf.ps",
    "raylab.backends.torch": "raylab.frameworks.torch.worker",
    "raylab.backends.torch_ps": "raylab.frameworks.torch.ps",
    "raylab.backends.xla": "raylab.frameworks.xla.kinds",
    "raylab.backends.xla_worker": "raylab.frameworks.xla.worker",
    "raylab.backends.tpu": "raylab.tpu",
    # 0.2.0's renames of internal modules (names that said something else)
    "raylab.frameworks.tf.scaling": "raylab.frameworks.tf.loss_scale",
    "raylab.frameworks.torch.scaling": "raylab.frameworks.torch.loss_scale",
    "raylab.loop.worker": "raylab.loop.worker_config",
    "raylab.driver.protocol": "raylab.compare.stats",
}
# the moves since 0.2.0: recording and comparing are packages of their own, names that collided renamed
HOUSE = {
    "raylab.driver.tracking": "raylab.record.tracking",
    "raylab.driver.sink": "raylab.record.sink",
    "raylab.driver.params": "raylab.record.params",
    "raylab.driver.compare": "raylab.compare.table",
    "raylab.driver.stats": "raylab.compare.stats",
    "raylab.driver.warm": "raylab.driver.groups",
    "raylab.driver.checkpoints": "raylab.driver.retention",
    "raylab.loop.warm": "raylab.loop.group_worker",
    "raylab.loop.run": "raylab.loop.epochs",
    "raylab.loop.config": "raylab.loop.worker_config",
    "raylab.overrides": "raylab.cli.overrides",
    "raylab.recipe": "raylab.task.recipe",
    "raylab.prewarm": "raylab.frameworks.prewarm",
    "raylab.driver.baseline": "raylab.driver.plain_runs",  # one word for the yardstick: plain (--plain)
    # the probes' room: what is measured before or beside the trials (raylab/probes/__init__.py)
    "raylab.driver.best": "raylab.probes.race",  # one word for --compile best's measuring: the race
    **{
        f"raylab.driver.{name}": f"raylab.probes.{name}"
        for name in ("choice", "batchsize", "floor", "peak", "utilization", "host")
    },
    # the driver process's plumbing, whatever it runs (raylab/runtime/__init__.py)
    **{f"raylab.driver.{name}": f"raylab.runtime.{name}" for name in ("cluster", "stopping", "console")},
    # the settings a trial runs with beyond its recipe (raylab/settings/__init__.py)
    **{f"raylab.driver.{name}": f"raylab.settings.{name}" for name in ("precision", "pinning")},
}
# old package -> where its contents went (the package itself is an empty module)
MOVED_PACKAGES = {"raylab.backends": "raylab.frameworks"}
MOVED.update(HOUSE)


def removed_in(old: str) -> str:
    return REMOVED_IN_NEXT if old in HOUSE else REMOVED_IN


def warn_moved(old: str, new: str, what: str = "") -> None:
    """One DeprecationWarning, attributed to the line that imported `old` (so Python's default filter shows it
    when that line is in the script being run)."""
    frame = sys._getframe(1)
    while frame is not None and _internal(frame.f_code.co_filename):
        frame = frame.f_back
    message = what or f"{old} moved to {new}; import {new} instead ({old} goes in raylab {removed_in(old)})"
    if frame is None:
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return
    globs = frame.f_globals
    warnings.warn_explicit(
        message,
        DeprecationWarning,
        frame.f_code.co_filename,
        frame.f_lineno,
        module=globs.get("__name__", "<string>"),
        registry=globs.setdefault("__warningregistry__", {}),
        # a module run with -m has a loader that can't give `__main__`'s source
        module_globals=None if globs.get("__name__") == "__main__" else globs,
    )


def _internal(filename: str) -> bool:
    return filename == __file__ or "importlib" in filename or filename.startswith("<frozen")


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of MOVED and MOVED_PACKAGES (and nothing else)."""

    def find_spec(self, name, path=None, target=None):
        if name in MOVED:
            return importlib.util.spec_from_loader(name, self)
        if name in MOVED_PACKAGES:
            return importlib.util.spec_from_loader(name, self, is_package=True)
        return None

    def create_module(self, spec):
        if spec.name in MOVED_PACKAGES:  # its submodules warn, each naming its own new path
            new = MOVED_PACKAGES[spec.name]
            module = types.ModuleType(spec.name, f"Moved to {new} (deprecated; goes in raylab {REMOVED_IN}).")
            module.__path__ = []
            return module
        new = MOVED[spec.name]
        warn_moved(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        pass


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
