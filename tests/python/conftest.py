"""Shared fixtures: the repo's paths, the extension (or a skip), and joint
graphs captured live from torch with the example models of
tools/capture_examples.py.

Contract: with REMAT_STRICT_SKIPS=1 (tools/test.sh sets it), a test that
skips because a package, a command or the built extension is missing fails
instead: CI runs from an environment only tools/setup.sh populates, and a
skip there would hide a missing install step. Skips for other reasons (a
case a graph does not have, a test run only inside a worker) stay skips."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")

try:
    import remat  # noqa: F401  (an installed or PYTHONPATH copy wins)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))


def pytest_configure(config):
    # tools/test.sh runs the other releases' suites with -m "not one_release".
    config.addinivalue_line(
        "markers", "one_release: checks remat's own tooling or search (the benchmarks' smoke runs, "
                   "the peak-limited searches' rules and plans), not a release's partitioner; CI "
                   "runs it under the main release only")


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


# The wordings of this suite's skips for a missing dependency, and
# importorskip's own ("could not import 'x'").
_MISSING = re.compile(r"could not import|not on PATH|not installed|not built|not importable"
                      r"|not available|no Chromium")


def _fail_missing_dependency(report) -> None:
    if os.environ.get("REMAT_STRICT_SKIPS") != "1" or not report.skipped:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if _MISSING.search(reason):
        report.outcome = "failed"
        report.longrepr = (f"skipped for a missing dependency under REMAT_STRICT_SKIPS=1 "
                           f"(tools/setup.sh must install it): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_missing_dependency(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):  # a module-level skip
    outcome = yield
    _fail_missing_dependency(outcome.get_result())
