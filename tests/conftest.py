"""One HOME and one Ray auth token for every Ray cluster this test process starts in-process.

Ray 2.60 keeps token-auth state per process: the first in-process `ray.init()` turns token mode
on and caches its token (in C++), and a later cluster in the same process with another token,
or none, turns the driver's own server against its workers ("Missing authorization header").
So the integration cluster and the multi-node cluster share this HOME and its token, with
RAY_AUTH_MODE=token set before either starts. Subprocess tests (e2e) set their own HOME and mode.
"""

from __future__ import annotations

import os
import secrets

import pytest


@pytest.fixture(scope="session", autouse=True)
def ray_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("ray-home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    saved = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        os.environ.pop(k, None)
    os.environ["HOME"] = str(home)  # Ray's token and results go here, not into the user's home
    os.environ["RAY_AUTH_MODE"] = "token"
    yield home
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
