"""A pytest plugin for tests/unit/test_partition.py: after a `--full` collection of the real tree, writes every
collected test and what each run of the suite keeps of them (tests.tiers.select: the default tier, each slice) to the
JSON file RAYLAB_PARTITION_OUT names."""

from __future__ import annotations

import json
import os
from pathlib import Path


def pytest_collection_finish(session):
    from tests import tiers

    items = session.items
    out = {
        "all": [i.nodeid for i in items],
        "default": [i.nodeid for i in tiers.select(items, False, None)],
        "slices": [
            [i.nodeid for i in tiers.select(items, True, (k, tiers.SLICES))] for k in range(1, tiers.SLICES + 1)
        ],
    }
    Path(os.environ["RAYLAB_PARTITION_OUT"]).write_text(json.dumps(out))
