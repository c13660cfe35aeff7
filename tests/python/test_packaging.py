"""The version and the minimum Python are each written once.

Contract: CMakeLists.txt's project(remat VERSION ...) is the one place the
version is written; the wheel's metadata (pyproject.toml reads it through
scikit-build-core's regex provider), the engine's remat/version.h (generated
by CMake), remat.__version__ and `remat --version` all show that value.
pyproject.toml's requires-python is the one minimum Python; CMake reads it
from there.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import remat

ROOT = Path(__file__).resolve().parents[2]


def _cmake_version() -> str:
    m = re.search(r"project\(remat VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert m, "CMakeLists.txt lost its project(remat VERSION ...) line"
    return m.group(1)


def test_every_version_is_cmakes_project_version():
    v = _cmake_version()
    assert remat.__version__ == v
    assert remat.version() == v
    assert importlib.metadata.version("remat") == v


@pytest.mark.skipif(shutil.which("remat") is None, reason="the remat command is not on PATH")
def test_the_command_reports_the_same_version():
    out = subprocess.run(["remat", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"remat {_cmake_version()}"


def test_no_other_file_writes_the_version():
    v = _cmake_version()
    for rel in ["pyproject.toml", "python/remat/__init__.py", "cmake/version.h.in"]:
        assert v not in (ROOT / rel).read_text(), f"{rel} writes the version {v} itself"


def test_cmake_reads_the_minimum_python_from_pyproject():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^requires-python = ">=[0-9]+\.[0-9]+"$', pyproject, re.M)
    cmake = (ROOT / "CMakeLists.txt").read_text()
    finds = re.findall(r"find_package\(Python ([^ ]+)", cmake)
    assert finds and all(f == "${REMAT_MIN_PYTHON}" for f in finds), finds
    assert "requires-python" in cmake  # where REMAT_MIN_PYTHON comes from


def _pyproject() -> dict:
    import tomllib

    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_the_test_extra_repeats_the_build_requirements_with_their_bounds():
    # The ThreadSanitizer stage builds the extension outside pip's isolated
    # build environment: what the package build needs, setup.sh installs too,
    # bounded the same way.
    doc = _pyproject()
    build = doc["build-system"]["requires"]
    test = doc["project"]["optional-dependencies"]["test"]
    assert build and set(build) <= set(test), (build, test)


def test_setup_installs_what_pyproject_lists():
    # tools/setup.sh reads its Python requirements from pyproject.toml only.
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "requirements.py"), "test"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == _pyproject()["project"]["optional-dependencies"]["test"]
    setup = (ROOT / "tools" / "setup.sh").read_text()
    assert "tools/requirements.py build" in setup and "tools/requirements.py test" in setup
    assert not re.search(r"pip install[^\n]*\b(pytest|nanobind|scipy)\b", setup), \
        "setup.sh names a package pyproject.toml should list"


def test_the_torch_extra_is_the_engines_supported_range():
    # pyproject's torch extra (what setup.sh installs from, and what pip
    # users get with remat[torch]) admits exactly the releases remat reproduces.
    releases = remat.torch_releases()
    (req,) = _pyproject()["project"]["optional-dependencies"]["torch"]
    major, oldest = releases["oldest"].split(".")
    _, newest = releases["newest"].split(".")
    assert req == f"torch>={major}.{oldest},<{major}.{int(newest) + 1}", req


def test_the_wheels_repair_tools_are_installed_for_ci():
    # CI builds and repairs the wheel from build-venv, which setup.sh fills
    # from the test extra: the wheel extra (tools/build_wheel.sh's own
    # environment) must be part of it, with the same bounds.
    extras = _pyproject()["project"]["optional-dependencies"]
    assert extras["wheel"] and set(extras["wheel"]) <= set(extras["test"]), extras["wheel"]
    assert "tools/requirements.py wheel" in (ROOT / "tools" / "build_wheel.sh").read_text()


def test_the_license_is_bsd_3_clause_and_shipped():
    # The metadata users rely on: the license (torch's), in a LICENSE file at
    # the root that the wheel carries, and the Python versions it supports.
    project = _pyproject()["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Neither the name of the copyright holder" in text
    minimum = tuple(int(x) for x in project["requires-python"].lstrip(">=").split("."))
    listed = {c.rsplit(" ", 1)[1] for c in project["classifiers"]
              if c.startswith("Programming Language :: Python :: 3.")}
    assert f"{minimum[0]}.{minimum[1]}" in listed, listed
