"""Recording the joint graphs torch hands its partitioner.

Contract: inside `with capture() as session:`, every call torch makes to a
partition function (torch.compile with an aot_autograd backend, aot_function,
aot_module, inductor) is recorded as a `CapturedJoint` — a deep copy of the
joint module taken *before* the partitioner runs (it mutates its input), the
joint inputs, num_fwd_outputs, static_lifetime_input_indices and the other
keyword arguments — and then forwarded to the original function, so compilation
proceeds unchanged. Leaving the block restores every patched name.

Two hooks cover all paths: the partition functions themselves (module
attributes looked up at call time), and the one function of AOTAutograd
every compilation hands its partition_fn to, also one a backend bound at
import time (_internals.patch_partition_call). A thread-local guard records each call once.

A capture ends where its block ends, whatever was imported inside it: a
module first imported inside the block (torch's aot_eager backend) may bind
a recording wrapper for good, so a wrapper records only while its session is
active and otherwise just calls the function it wraps, and a later session
unwraps such a stale wrapper and records with its own. Every module the
patches touch is imported before anything is patched, so none of them binds
a wrapper at import.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import operator
import os
import threading
from typing import Any, Callable, Iterator, Optional

import torch.fx as fx

import remat

from . import _internals

_guard = threading.local()


@dataclasses.dataclass
class CapturedJoint:
    joint_module: fx.GraphModule
    joint_inputs: Any
    num_fwd_outputs: int
    static_lifetime_input_indices: Optional[list]
    kwargs: dict
    partitioner: str  # "min_cut", "default", or the partition function's name

    def export(self, *, as_json: bool = False, handles: Optional[list] = None) -> dict | bytes:
        from ._fx_to_json import export_joint_graph

        return export_joint_graph(
            self.joint_module,
            self.num_fwd_outputs,
            self.static_lifetime_input_indices,
            as_json=as_json,
            handles=handles,
        )


def _partitioner_name(fn: Callable) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__wrapped__", fn)
    name = getattr(fn, "__name__", repr(fn))
    return {
        "min_cut_rematerialization_partition": "min_cut",
        "default_partition": "default",
    }.get(name, name)


class CaptureSession:
    """Records partitioner calls while active; see the module docstring."""

    def __init__(self) -> None:
        self.captured: list[CapturedJoint] = []
        self._patches: list[tuple[Any, str, Any]] = []
        self._undo: list[Callable[[], None]] = []
        self._active = False

    # --- recording -------------------------------------------------------
    def _record(self, fn: Callable, joint_module, joint_inputs, kwargs: dict) -> None:
        kwargs = dict(kwargs)
        num_fwd_outputs = kwargs.pop("num_fwd_outputs")
        static = kwargs.pop("static_lifetime_input_indices", None)
        self.captured.append(
            CapturedJoint(
                joint_module=copy.deepcopy(joint_module),
                joint_inputs=joint_inputs,
                num_fwd_outputs=num_fwd_outputs,
                static_lifetime_input_indices=list(static) if static is not None else None,
                kwargs=kwargs,
                partitioner=_partitioner_name(fn),
            )
        )

    def wrap(self, fn: Callable) -> Callable:
        """A partition function that records its calls, then calls `fn`."""
        session = self

        @functools.wraps(fn)
        def recording_partition(joint_module, joint_inputs, *args, **kwargs):
            # Outside its block (a wrapper a module bound at import) it only forwards.
            if not session._active or getattr(_guard, "active", False):
                return fn(joint_module, joint_inputs, *args, **kwargs)
            if args:  # num_fwd_outputs is keyword-only in torch; accept it positionally too
                kwargs = {"num_fwd_outputs": args[0], **kwargs}
                args = ()
            session._record(fn, joint_module, joint_inputs, kwargs)
            _guard.active = True
            try:
                return fn(joint_module, joint_inputs, **kwargs)
            finally:
                _guard.active = False

        recording_partition.__remat_capture__ = session  # type: ignore[attr-defined]
        recording_partition.__remat_wrapped__ = fn  # type: ignore[attr-defined]
        return recording_partition

    # --- patching --------------------------------------------------------
    def _patch(self, obj: Any, attr: str, new: Any) -> None:
        self._patches.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, new)

    def __enter__(self) -> "CaptureSession":
        partitioners = _internals.partitioners()
        # Imported first, so that none binds a wrapper of this session at import.
        holders = [(_maybe_import(module_name), name)
                   for module_name, name in _internals.PARTITION_FN_HOLDERS]
        originals = {name: _unwrap_ended(getattr(partitioners, name))
                     for name in ("min_cut_rematerialization_partition", "default_partition")}
        wrapped = {name: self.wrap(fn) for name, fn in originals.items()}
        self._active = True
        for mod, name in holders:
            if mod is not None and _unwrap_ended(getattr(mod, name, None)) is originals[name]:
                self._patch(mod, name, wrapped[name])

        def record(partition_fn: Callable) -> Callable:
            partition_fn = _unwrap_ended(partition_fn)
            if getattr(partition_fn, "__remat_capture__", None) is not None:
                return partition_fn  # an enclosing session's, still active: it records once
            return self.wrap(partition_fn)

        self._undo.append(_internals.patch_partition_call(record))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False
        while self._undo:
            self._undo.pop()()
        while self._patches:
            obj, attr, old = self._patches.pop()
            setattr(obj, attr, old)

    # --- saving ----------------------------------------------------------
    def save(self, path: str | os.PathLike, index: Optional[int] = None) -> list[str]:
        """Writes captured joint graphs as format-v1 JSON; returns the paths.

        A `path` ending in a separator, or naming a directory, is a directory
        (created when missing): every capture, or the one `index` picks, goes
        there as joint_<i>.json. Otherwise `path` is a file: with `index`, or
        with one capture, that capture is written to it; with several, each to
        `path` with `_<i>` before the extension. Missing parent directories
        are created. Each file is written as the remat command writes its
        outputs (remat.write_file: whole or not at all, a file keeps its mode,
        links are followed, a device is written into, never replaced). An
        empty path is a remat.RematIOError, an index that picks no capture a
        remat.InvalidOptionError.
        """
        path = os.fspath(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not path:
            raise remat.RematIOError("cannot write '': the path is empty")
        picked = ([self._check_index(index)] if index is not None
                  else list(range(len(self.captured))))
        if path.endswith(("/", os.sep)) or os.path.isdir(path):
            items = [(os.path.join(path, f"joint_{i}.json"), i) for i in picked]
        elif len(picked) == 1:
            items = [(path, picked[0])]
        else:
            root, ext = os.path.splitext(path)
            items = [(f"{root}_{i}{ext or '.json'}", i) for i in picked]
        written = []
        for p, i in items:
            folder = os.path.dirname(p)
            if folder:
                os.makedirs(folder, exist_ok=True)
            remat.write_file(p, self.captured[i].export(as_json=True) + b"\n")
            written.append(p)
        return written

    def _check_index(self, index: Any) -> int:
        n = len(self.captured)
        held = f"the session captured {n} graph{'s' if n != 1 else ''}" + \
            (f" (indices 0 to {n - 1})" if n else "")
        try:
            i = operator.index(index)
        except TypeError:
            i = None
        if i is None or isinstance(index, bool):
            raise remat.InvalidOptionError(
                f"save(index={index!r}): the index must be an integer; {held}")
        if not 0 <= i < n:
            raise remat.InvalidOptionError(f"save(index={i}): no such capture; {held}")
        return i


def _unwrap_ended(fn: Any) -> Any:
    """`fn` without the recording wrappers of sessions that have ended."""
    while True:
        session = getattr(fn, "__remat_capture__", None)
        if not isinstance(session, CaptureSession) or session._active:
            return fn
        fn = fn.__remat_wrapped__


def _maybe_import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:  # an optional front end (inductor) that fails to import is not ours to fix
        return None


@contextlib.contextmanager
def capture() -> Iterator[CaptureSession]:
    """Context manager: records every joint graph partitioned inside the block."""
    with CaptureSession() as session:
        yield session


def save_capture(path: str, session: CaptureSession, index: Optional[int] = None) -> list[str]:
    """Writes a session's captures as format-v1 JSON files (see CaptureSession.save)."""
    return session.save(path, index)
