"""Names of call_function targets, both ways.

Contract (shared with the C++ op registry, docs/format.md "Ops"):
  OpOverload          -> "{namespace}.{op}.{overload}"   ("aten.mm.default")
  OpOverloadPacket    -> "{namespace}.{op}"               ("aten.rand", as str() of it)
  HigherOrderOperator -> "higher_order.{name}"            ("higher_order.with_effects")
  Python callable     -> "{module}.{qualname}", with "_operator" spelled
                         "operator"                       ("operator.getitem")
`resolve_target` inverts the mapping; within one process it returns the very
object that was exported, even for callables no import path reaches.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

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


def resolve_target(name: str) -> Callable[..., Any]:
    """The callable a target name stands for; raises KeyError when none is found."""
    if name in _SEEN:
        return _SEEN[name]
    obj = None
    if name.startswith("higher_order."):
        # The RNG HOPs are registered when their module is first imported.
        _internals.load_op_namespaces("higher_order")
        obj = getattr(torch.ops.higher_order, name[len("higher_order."):], None)
    else:
        first = name.split(".", 1)[0]
        # Some namespaces (activation offloading's ao::offload, ao::reload,
        # ao::wait_tensor) are registered when a torch module is imported.
        _internals.load_op_namespaces(first)
        # A Python module of that name wins; op namespaces are not modules.
        if first in ("operator", "math", "builtins", "torch") or _importable(first):
            obj = _resolve_function(name)
        if obj is None:
            obj = _resolve_overload(name)
        if obj is None:
            obj = _resolve_function(name)
    if obj is None:
        raise KeyError(f"remat: cannot resolve target {name!r} to a callable")
    _SEEN[name] = obj
    return obj


def _importable(mod: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(mod) is not None
    except (ImportError, ValueError):
        return False
