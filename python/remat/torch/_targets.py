"""Names of call_function targets, both ways.

Contract (shared with the C++ op registry, docs/format.md "Ops"):
  OpOverload          -> "{namespace}.{op}.{overload}"   ("aten.mm.default")
  OpOverloadPacket    -> "{namespace}.{op}"               ("aten.rand", as str() of it)
  HigherOrderOperator -> "higher_order.{name}"            ("higher_order.with_effects")
  Python callable     -> "{module}.{qualname}", with "_operator" spelled
                         "operator"                       ("operator.getitem")
`resolve_target` inverts the mapping; within one process it returns the very
object that was exported, even for callables no import path reaches.

Trust (docs/format.md "Trust"): a graph file is data, and loading one must not
run code. Untrusted (the default), a name resolves only to what the exporter
writes for torch's graphs: an operator registered under torch.ops (overload or
packet), a higher-order operator of torch.ops.higher_order, or one of the
Python functions FX graphs call on symbolic sizes (`_SYMBOLIC_FUNCTIONS`:
operator.getitem, the arithmetic and comparison operators, math.floor/ceil/
trunc, round, torch.sym_*). Anything else is refused by name before anything
is imported. Of those, `denied` refuses the ops with effects outside tensors
(files, raw storages, printing, TorchScript-only operators, kernels or
callables looked up in process-wide tables, unchecked memory offsets; the
list and its reasons are in docs/format.md). `trusted=True` resolves any
importable dotted name and lifts the denial, for files the caller wrote.
Objects this process exported itself (`register_target`) always resolve:
they did not come from a file.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Optional

import torch

from . import _internals

# name -> the exported object. Only grows; names are deterministic functions
# of the objects, so one process never maps a name to two objects in practice.
_SEEN: dict[str, Any] = {}

_MODULE_ALIASES = {"_operator": "operator", "builtins": "builtins"}


def target_name(target: Any) -> str:
    if isinstance(target, _internals.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, _internals.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    if isinstance(target, _internals.OpOverloadPacket):
        return target._qualified_op_name.replace("::", ".")
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or "builtins"
    module = _MODULE_ALIASES.get(module, module)
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if qualname is None:
        qualname = type(target).__qualname__
    return f"{module}.{qualname}"


def register_target(name: str, target: Any) -> None:
    _SEEN.setdefault(name, target)


def _resolve_function(name: str) -> Any:
    parts = name.split(".")
    # The longest importable prefix is the module; the rest is the qualname.
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _resolve_overload(name: str) -> Any:
    """An OpOverload ("aten.mm.default") or an OpOverloadPacket ("aten.rand")."""
    parts = name.split(".")
    if len(parts) not in (2, 3):
        return None
    try:
        obj: Any = getattr(getattr(torch.ops, parts[0]), parts[1])
        return getattr(obj, parts[2]) if len(parts) == 3 else obj
    except (AttributeError, RuntimeError):
        return None


class UntrustedTargetError(KeyError):
    """A target an untrusted graph file may not name (see the module doc)."""


# Python functions the exporter writes, by name: what torch's symbolic shapes
# call on SymInt / SymFloat / SymBool values (sym_node.METHOD_TO_OPERATOR),
# and the getitem that unpacks multi-output ops. Every one is a pure function
# of its arguments. Deliberately not the whole operator module: attrgetter,
# methodcaller and call would let a graph walk from any value to any code.
def _symbolic_functions() -> dict[str, Any]:
    import math
    import operator

    funcs: dict[str, Any] = {"operator.getitem": operator.getitem}
    for f in _internals.symbolic_method_operators():
        name = target_name(f)
        if "<" not in name:  # sym_node's own lambdas have no importable name
            funcs[name] = f
    for name in ("sym_float", "sym_int", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sum",
                 "_sym_sqrt"):
        if hasattr(torch, name):
            funcs[f"torch.{name}"] = getattr(torch, name)
    for name in ("floor", "ceil", "trunc"):
        funcs[f"math.{name}"] = getattr(math, name)
    funcs["builtins.round"] = round
    return funcs


_SYMBOLIC_FUNCTIONS: dict[str, Any] = {}


def _resolve_untrusted(name: str) -> Any:
    """An op of torch.ops, a higher-order op, or a symbolic-shape function;
    None for anything else. Imports nothing a file names."""
    if not _SYMBOLIC_FUNCTIONS:
        _SYMBOLIC_FUNCTIONS.update(_symbolic_functions())
    if name in _SYMBOLIC_FUNCTIONS:
        return _SYMBOLIC_FUNCTIONS[name]
    if name.startswith("higher_order."):
        _internals.load_op_namespaces("higher_order")
        obj = getattr(torch.ops.higher_order, name[len("higher_order."):], None)
        return obj if isinstance(obj, _internals.HigherOrderOperator) else None
    obj = _resolve_overload(name)
    if obj is None:
        # A fixed set of torch modules registers some namespaces on import
        # (imported only when a name is missing: inductor's prims are heavy).
        _internals.load_op_namespaces(name.split(".", 1)[0])
        obj = _resolve_overload(name)
    return obj if isinstance(obj, (_internals.OpOverload, _internals.OpOverloadPacket)) else None


# --- ops with effects outside tensors ------------------------------------------------
#
# Refused in an untrusted file even though torch.ops registers them
# (docs/format.md "Trust" lists them with these reasons). Found by class from
# torch's registered schemas (every namespace, torch 2.11-2.15): a string
# argument naming a file, a Storage argument, an interpreter-only operator;
# plus the ops whose effect no schema shows, by name.

_DENIED_OPS = {  # schema name (every overload) -> why
    "aten::_print": "prints to the process's standard output",
    "debugprims::load_tensor": "reads tensors from the files of the process's content-store reader",
    "inductor::_alloc_from_pool": "makes a tensor at a byte offset of another tensor's memory that "
                                  "nothing bounds-checks",
    "inductor::_reinterpret_tensor": "makes a tensor at an offset of another tensor's memory that "
                                     "nothing bounds-checks",
}

_DENIED_HIGHER_ORDER = {  # HigherOrderOperator.name() -> why
    "triton_kernel_wrapper_mutation": "runs the Triton kernel an index picks from a process-wide "
                                      "side table",
    "triton_kernel_wrapper_functional": "runs the Triton kernel an index picks from a process-wide "
                                        "side table",
    "inductor_compiled_code": "runs the compiled code an index picks from a process-wide side table",
    "invoke_leaf_function": "calls Python functions and modules an index picks from process-wide "
                            "tables",
    "dynamo_bypassing_wrapper": "calls the function a string from the file picks from a module's "
                                "meta",
    "inline_asm_elementwise": "compiles assembly text from the file into a kernel",
    "print": "prints to the process's standard output",
}

_FILE_ARGUMENT = re.compile(r"file|path|dir|url", re.IGNORECASE)


def denied(target: Any) -> Optional[str]:
    """Why an untrusted file may not call `target` (an op with effects
    outside tensors), or None. A packet is denied when any overload is:
    calling it may pick that overload."""
    if isinstance(target, _internals.HigherOrderOperator):
        return _DENIED_HIGHER_ORDER.get(target.name())
    if isinstance(target, _internals.OpOverload):
        return _overload_denied(target)
    if isinstance(target, _internals.OpOverloadPacket):
        for overload in target.overloads():
            try:
                reason = _overload_denied(getattr(target, overload))
            except (AttributeError, RuntimeError):
                continue
            if reason is not None:
                return f"has an overload ({overload!r}) that {reason}"
    return None


def _overload_denied(op: Any) -> Optional[str]:
    schema = op._schema
    reason = _DENIED_OPS.get(schema.name)
    if reason is not None:
        return reason
    for a in schema.arguments:
        kind = str(a.type)
        if "Storage" in kind:
            return f"takes a raw Storage (argument {a.name!r})"
        if kind.startswith("str") and _FILE_ARGUMENT.search(a.name):
            return f"names a file (argument {a.name!r})"
    if not _internals.is_dispatcher_op(op):
        return ("is a TorchScript interpreter operator (not registered with the dispatcher, so no "
                "trace records it; the class holds aten::save, prim::Print, prim::rpc_sync, "
                "aten::manual_seed)")
    return None


def _resolve_trusted(name: str) -> Any:
    """Any importable dotted name (trusted files only)."""
    if name.startswith("higher_order."):
        # The RNG HOPs are registered when their module is first imported.
        _internals.load_op_namespaces("higher_order")
        return getattr(torch.ops.higher_order, name[len("higher_order."):], None)
    first = name.split(".", 1)[0]
    obj = None
    # A Python module of that name wins; op namespaces are not modules.
    if first in ("operator", "math", "builtins", "torch") or _importable(first):
        obj = _resolve_function(name)
    if obj is None:
        obj = _resolve_overload(name)
    if obj is None:
        # Some namespaces (activation offloading's ao::offload, ao::reload,
        # ao::wait_tensor; inductor's prims) are registered when a torch
        # module is imported.
        _internals.load_op_namespaces(first)
        obj = _resolve_overload(name)
    if obj is None:
        obj = _resolve_function(name)
    return obj


def resolve_target(name: str, trusted: bool = False) -> Callable[..., Any]:
    """The callable a target name stands for. Untrusted, a name outside the
    module doc's list raises UntrustedTargetError (a KeyError) naming it;
    trusted, KeyError when no importable object has that name."""
    if name in _SEEN:
        return _SEEN[name]
    if not trusted:
        obj = _resolve_untrusted(name)
        if obj is None:
            raise UntrustedTargetError(
                f"remat: target {name!r} is not an operator registered with torch.ops, a "
                "higher_order op, or a symbolic-shape function (operator.getitem, torch.sym_*, ...): "
                "a graph file may name only those, since resolving any other name could run "
                "code; pass trusted=True for a file you trust")
        reason = denied(obj)
        if reason is not None:
            raise UntrustedTargetError(
                f"remat: target {name!r} {reason}: an op with effects outside tensors, which an "
                "untrusted graph file may not call (docs/format.md \"Trust\"); pass trusted=True "
                "for a file you trust")
        _SEEN[name] = obj  # safe to remember: any untrusted file may name it
        return obj
    # Not remembered: a later untrusted load must not find what a trusted one
    # resolved.
    obj = _resolve_trusted(name)
    if obj is None:
        raise KeyError(f"remat: cannot resolve target {name!r} to a callable")
    return obj


def _importable(mod: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False
