"""Shared fixtures: the repo's paths, the extension (or a skip), and joint
graphs captured live from torch with the example models of
tools/capture_examples.py."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")

try:
    import remat  # noqa: F401  (an installed or PYTHONPATH copy wins)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))


@pytest.fixture(scope="session")
def examples_dir() -> str:
    return EXAMPLES


@pytest.fixture(scope="session")
def ext():
    """The compiled extension, or a skip when this tree has none built."""
    try:
        from remat import _remat
    except ImportError as e:
        pytest.skip(f"remat._remat is not built: {e}")
    return _remat


def _load_capture_tool():
    spec = importlib.util.spec_from_file_location(
        "capture_examples", os.path.join(ROOT, "tools", "capture_examples.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def capture_tool():
    pytest.importorskip("torch")
    return _load_capture_tool()


@pytest.fixture(scope="session")
def captured(capture_tool) -> dict:
    """name -> CapturedJoint for every example model, captured once per session."""
    warnings.filterwarnings("ignore")
    return {name: make() for name, make in capture_tool.examples().items()}
