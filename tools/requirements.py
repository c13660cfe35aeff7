"""Prints the requirements tools/setup.sh installs, read from pyproject.toml.

Contract: pyproject.toml is the one place remat's Python requirements are
written: the package build's (`[build-system] requires`), the supported torch
releases (the `torch` extra) and everything a stage of tools/test.sh imports
or finds (the `test` extra, which repeats the build requirements with the
same bounds; tests/python/test_packaging.py checks that), and the tools that
repair the wheel (the `wheel` extra, also part of `test`: CI builds the wheel). This script only
reads them, so setup.sh cannot drift from the package build.

  python tools/requirements.py build     the build-system requirements, one per line
  python tools/requirements.py test      the test extra, one per line
  python tools/requirements.py wheel     the wheel extra (tools/build_wheel.sh's repair tools)
  python tools/requirements.py torch     the torch extra (the supported range)
  python tools/requirements.py torch-ok  exit 0 when the running interpreter's
                                         torch is inside that range, 1 otherwise

Runs under the interpreter setup.sh installs into, before anything else is
installed there: it needs only the standard library (tomllib, Python 3.11+)
or pip's vendored copies of tomli and packaging (older Pythons).
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pip vendors the same parser
    from pip._vendor import tomli as tomllib  # type: ignore[no-redef]

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _load() -> dict:
    with PYPROJECT.open("rb") as f:
        return tomllib.load(f)


def _requirement_class():
    try:
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement
    return Requirement


def torch_requirement(doc: dict) -> str:
    (req,) = doc["project"]["optional-dependencies"]["torch"]
    return req


def installed_torch_ok(requirement: str) -> bool:
    """Whether this interpreter's torch is a supported release.

    A local build suffix (+cpu, +cu132) does not matter; a pre-release or
    dev build is outside the range, as the drop-in treats it.
    """
    import importlib.metadata as md

    try:
        version = md.version("torch")
        spec = _requirement_class()(requirement).specifier
    except (md.PackageNotFoundError, ImportError):  # no torch, or neither packaging nor pip
        return False
    return spec.contains(version.split("+")[0], prereleases=False)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in ("build", "test", "wheel", "torch", "torch-ok"):
        print(__doc__, file=sys.stderr)
        return 2
    doc = _load()
    what = argv[1]
    if what == "build":
        print("\n".join(doc["build-system"]["requires"]))
    elif what in ("test", "wheel"):
        print("\n".join(doc["project"]["optional-dependencies"][what]))
    elif what == "torch":
        print(torch_requirement(doc))
    else:
        return 0 if installed_torch_ok(torch_requirement(doc)) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
