"""Contract: `bench_module(name)` imports bench/<name>.py as a module for
the benchmarks' smoke tests, with bench/ on sys.path only while it imports
(its modules import each other by plain name)."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def bench_module(name: str) -> ModuleType:
    sys.path.insert(0, BENCH)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)
