"""What an answer raylab keeps on this host is valid for: one identity for every cache (the start-up floor, the
measured peaks, --compile best's races). (The fingerprint of a recipe's model, the races' other key:
raylab/probes/fingerprint.py.)

`identity()` is the host (its name, CPUs and CPU model), Python, raylab (its version and a hash of its own source,
so that a checkout's change to how a step runs is a new raylab), Ray, and each framework's package with the
compilers and runtimes it declares (`Framework.runtimes`: Triton, cuDNN, CUDA's runtime, Keras, jaxlib, libtpu...,
as installed). A kept answer whose identity differs is not read.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import sys
from importlib import metadata
from pathlib import Path

from raylab.registry import Framework, frameworks

RAYLAB = Path(__file__).resolve().parents[1]


def version(name: str) -> str | None:
    try:
        return metadata.version(name)  # names are normalized: a module's name finds its distribution
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def raylab_source() -> str:
    """A hash of raylab's own .py files: what a version number misses in a checkout."""
    digest = hashlib.sha256()
    for path in sorted(RAYLAB.rglob("*.py")):
        digest.update(str(path.relative_to(RAYLAB)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def identity(of: list[Framework] | None = None) -> dict:
    """This host and the versions that set what is measured on it (every framework's, or those of `of`)."""
    from raylab.loop.worker_config import cpu_model

    packages = dict.fromkeys(p for fw in (of if of is not None else frameworks()) for p in (fw.package, *fw.runtimes))
    return {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "python": sys.version.split()[0],
        "raylab": f"{version('raylab')}+{raylab_source()}",
        "ray": version("ray"),
        **{name: version(name) for name in packages},
    }


def __getattr__(name: str):
    """`model_source`, which moved to raylab/probes/fingerprint.py: found, with a DeprecationWarning (until 0.4.0)."""
    if name != "model_source":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from raylab.probes import fingerprint

    warnings.warn(
        "raylab.probes.host.model_source moved to raylab.probes.fingerprint.model_source; import it from "
        "there (the old name goes in raylab 0.4.0)",
        DeprecationWarning,
        stacklevel=2,
    )
    return fingerprint.model_source
