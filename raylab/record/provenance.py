"""What code a run ran: the driver's packages and Python (`driver_versions`; each worker reports what it imported)
and the git commit of the recipe's checkout (`git_commit`, `RAYLAB_GIT_COMMIT` where the checkout is not there)."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from raylab.registry import frameworks


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_commit(where: Path) -> str:
    if os.environ.get("RAYLAB_GIT_COMMIT"):
        return os.environ["RAYLAB_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def driver_versions() -> dict:
    """Versions as installed on the driver; workers report what they actually imported."""
    return {
        "version.python": platform.python_version(),
        "version.ray": package_version("ray"),
        "version.mlflow": package_version("mlflow"),
        **{f"version.{fw.package}": package_version(fw.package) for fw in frameworks()},
    }
