"""Which torch release remat.torch reproduces.

Contract:
  * running() is the running torch's release as (major, minor), read from
    torch.__version__; prerelease() says whether it is a pre-release,
    nightly or development build.
  * reproduced() is the release the drop-in asks the engine for: the running
    one when remat supports it (the engine's range, remat.torch_releases()).
    Outside the range (an older or newer torch, any pre-release) it is an
    UnsupportedError naming the running version and the supported range,
    unless the user opted in: set_torch_release("nearest") (or
    REMAT_TORCH_RELEASE=nearest) runs the nearest supported release's
    behavior, set_torch_release("2.14") a given one, at the user's risk.
  * install() asks supported() first: outside the range, and without an
    opt-in, it leaves torch's partitioner in place with one warning.
  * behaves(switch) reads one of the engine's release switches for the
    reproduced release: what the Python side does differently per release
    is switched by the same table (remat.torch_releases()). Inside
    following(options) it reads them as that partition's options set them
    (their "torch_release", then their "torch_switches"), so the drop-in's
    switches and the engine's agree for every partition.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator, Mapping
from typing import Any, Optional

import torch

import remat

VERSION: str = torch.__version__


def _parse(text: str) -> Optional[tuple[int, int, bool]]:
    return remat._ext().parse_torch_version(text)


@functools.cache
def _table() -> tuple[tuple[tuple[int, int], tuple[int, int]], dict[str, tuple[int, int]]]:
    """The engine's release table, read once (it never changes in a process;
    building it crosses into the extension, and every partition asks it
    several times): the supported range and each switch's first release."""
    r = remat.torch_releases()
    since = {name: _as_tuple(first) for name, first, *_ in r["switches"]}
    return (_as_tuple(r["oldest"]), _as_tuple(r["newest"])), since


def _range() -> tuple[tuple[int, int], tuple[int, int]]:
    return _table()[0]


def _as_tuple(release: str) -> tuple[int, int]:
    major, minor = release.split(".")[:2]
    return int(major), int(minor)


@functools.cache
def _running() -> tuple[tuple[int, int], bool]:
    # Parsed by the engine on first use (its one parser of torch versions),
    # so importing this module does not need the extension.
    parsed = _parse(VERSION)
    if parsed is None:
        return (0, 0), True
    return (parsed[0], parsed[1]), parsed[2]


@functools.cache
def _native(running_release: tuple[tuple[int, int], bool]) -> Optional[str]:
    """The running release ("major.minor") when remat reproduces it, else
    None; keyed by _running()'s answer (asked by every partition, and the
    answer never changes in a process, but tests stand in other releases)."""
    if not supported():
        return None
    major, minor = running_release[0]
    return f"{major}.{minor}"


def running() -> tuple[int, int]:
    """The running torch's release, (major, minor)."""
    return _running()[0]


def prerelease() -> bool:
    """Whether the running torch is a pre-release, nightly or dev build."""
    return _running()[1]

# The user's opt-in: None (none), "nearest", or "major.minor".
_choice: Optional[str] = os.environ.get("REMAT_TORCH_RELEASE") or None


def supported_range() -> str:
    (o1, o2), (n1, n2) = _range()
    return f"torch {o1}.{o2} to {n1}.{n2}"


def supported() -> bool:
    """Whether the running torch is a release remat reproduces."""
    oldest, newest = _range()
    return not prerelease() and oldest <= running() <= newest


def set_torch_release(choice: Optional[str]) -> None:
    """Opt in to running remat under a torch outside the supported range:
    "nearest" reproduces the nearest supported release, "2.14" that release;
    None withdraws the opt-in. Affects calls made after it."""
    global _choice
    if choice is not None and choice != "nearest":
        parsed = _parse(choice)
        oldest, newest = _range()
        if parsed is None or parsed[2] or not oldest <= (parsed[0], parsed[1]) <= newest:
            raise remat.InvalidOptionError(
                f"set_torch_release: {choice!r} is not a supported release "
                f"({supported_range()}) or \"nearest\"")
    _choice = choice


def unsupported_message() -> str:
    return (f"remat: torch {VERSION} is outside the releases remat reproduces "
            f"({supported_range()}"
            + (", and pre-releases and development builds are not among them"
               if prerelease() else "")
            + "); torch's own partitioner stays in charge. To run remat anyway with the nearest "
            "supported release's behavior, at your own risk: "
            "remat.torch.set_torch_release(\"nearest\") or REMAT_TORCH_RELEASE=nearest")


def reproduced() -> str:
    """The release ("2.15") whose partitioner the drop-in reproduces now."""
    if _choice is not None and _choice != "nearest":
        return _choice
    native = _native(_running())
    if native is not None:
        return native
    if _choice == "nearest":
        oldest, newest = _range()
        nearest = min(max(running(), oldest), newest)
        return f"{nearest[0]}.{nearest[1]}"
    raise remat.UnsupportedError(unsupported_message())


# The options of the partition in progress (following()): its release and
# single-switch overrides, or None outside one.
_partition_options: contextvars.ContextVar[Optional[tuple[str, Mapping[str, bool]]]] = (
    contextvars.ContextVar("remat_partition_options", default=None))


@contextlib.contextmanager
def following(options: Mapping[str, Any]) -> Iterator[None]:
    """Within it, behaves() answers as `options` set the engine's switches:
    their "torch_release" (else the reproduced release), then their
    "torch_switches" on top, as the engine applies them."""
    release = options.get("torch_release") or reproduced()
    token = _partition_options.set((str(release), options.get("torch_switches") or {}))
    try:
        yield
    finally:
        _partition_options.reset(token)


def behaves(switch: str, options: Optional[Mapping[str, Any]] = None) -> bool:
    """One of the engine's release switches (remat/torch_release.h), for the
    release reproduced now, or as the options of one partition set it (given
    here, or inside following()): the Python side's differences between
    releases (what it stamps on the graphs it builds, the group it syncs on)
    read the same table as the engine's, so each difference still has one
    home. As in the engine, a "torch_switches" entry wins over the release."""
    current = _partition_options.get()
    if options is not None:
        current = (str(options.get("torch_release") or reproduced()),
                   options.get("torch_switches") or {})
    if current is not None and switch in current[1]:
        _since(switch)  # an unknown name is an error here too
        return bool(current[1][switch])
    release = current[0] if current is not None else reproduced()
    return _as_tuple(release) >= _since(switch)


def _since(switch: str) -> tuple[int, int]:
    since = _table()[1].get(switch)
    if since is None:
        raise KeyError(f"remat: no torch release switch named {switch!r}")
    return since
