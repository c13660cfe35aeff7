"""The graph documents the repository ships.

Contract: `shipped_documents()` is every examples/*.json and every
tests/data/**/*.json, in sorted path order (examples first), each as
(path, parsed JSON); joint graphs, results and options alike, for the
tests that check every shipped graph.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def shipped_documents() -> list[tuple[str, Any]]:
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.json")))
    paths += sorted(glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.json"), recursive=True))
    out = []
    for path in paths:
        with open(path) as f:
            out.append((path, json.load(f)))
    return out
