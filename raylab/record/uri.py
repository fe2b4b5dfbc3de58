"""The MLflow tracking URI checked at the door, before Ray or any worker starts: a scheme MLflow has a store for,
and a sqlite store's directory."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from raylab.errors import UserError


def check_sqlite(uri: str) -> None:
    path = Path(urlparse(uri).path if uri.startswith("sqlite:////") else uri[len("sqlite:///") :])
    if not path.parent.is_dir():
        raise UserError(
            f"the MLflow store {uri} is in a directory that does not exist ({path.parent}); "
            "create it or pass another --tracking-uri."
        )


def check_local_store(uri: str) -> bool:
    """True for a sqlite store whose path checks out (UserError if it does not): it can be opened beside Ray's
    start. False for any other store."""
    if not uri.startswith("sqlite:"):
        return False
    check_scheme(uri)
    check_sqlite(uri)
    return True


def check_scheme(uri: str) -> None:
    """An MLflow tracking URI whose scheme MLflow has a store for; UserError otherwise (before anything runs)."""
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    scheme = urlparse(uri).scheme
    known = sorted(k for k in _tracking_store_registry._registry if k)
    if scheme and len(scheme) > 1 and scheme not in known:  # one letter: a Windows drive, i.e. a path
        raise UserError(
            f"the MLflow tracking URI {uri} has scheme '{scheme}', which MLflow has no store for; "
            f"use one of {', '.join(s + '://' for s in known if s not in ('file',))} or a path."
        )
