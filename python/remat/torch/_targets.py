"""Names of call_function targets, both ways.

Contract (shared with the C++ op registry, docs/format.md "Ops"):
  OpOverload          -> "{namespace}.{op}.{overload}"   ("aten.mm.default")
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

# name -> the exported object. Only grows; names are deterministic functions
# of the objects, so one process never maps a name to two objects in practice.
_SEEN: dict[str, Any] = {}

_MODULE_ALIASES = {"_operator": "operator", "builtins": "builtins"}


def target_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
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
    parts = name.split(".")
    if len(parts) != 3:
        return None
    ns, op, overload = parts
    try:
        return getattr(getattr(getattr(torch.ops, ns), op), overload)
    except (AttributeError, RuntimeError):
        return None


def resolve_target(name: str) -> Callable[..., Any]:
    """The callable a target name stands for; raises KeyError when none is found."""
    if name in _SEEN:
        return _SEEN[name]
    obj = None
    if name.startswith("higher_order."):
        # The RNG HOPs are registered when their module is first imported.
        import torch._prims.rng_prims  # noqa: F401

        obj = getattr(torch.ops.higher_order, name[len("higher_order."):], None)
    else:
        first = name.split(".", 1)[0]
        if first == "ao":
            # torch registers the activation-offloading ops (ao::offload,
            # ao::reload, ao::wait_tensor) when this module is first imported.
            import torch._functorch._activation_offloading.offload_ops  # noqa: F401
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
