"""One HOME and one Ray auth token for every Ray cluster this test process starts in-process.

Ray 2.60 keeps token-auth state per process: a token read once (by an import at collection time
or the first in-process `ray.init()`) is cached in C++, and a cluster started later with another
token, or none, cannot be reached, or turns the driver's own server against its workers
("Missing authorization header"). So this is set when pytest loads this file, before any test
module is imported: a fresh HOME with a token file, RAY_AUTH_MODE=token and RAY_AUTH_TOKEN.
The integration and multi-node clusters use them; subprocess tests (e2e) set their own.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

_SAVED = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
RAY_HOME = Path(tempfile.mkdtemp(prefix="raylab-test-home-"))
TOKEN = secrets.token_hex(32)
(RAY_HOME / ".ray").mkdir()
(RAY_HOME / ".ray" / "auth_token").write_text(TOKEN)
os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
os.environ.update(HOME=str(RAY_HOME), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)


def pytest_unconfigure(config):
    for k, v in _SAVED.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(RAY_HOME, ignore_errors=True)
