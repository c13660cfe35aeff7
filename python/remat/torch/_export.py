"""FX joint graph -> format-v1 document (docs/format.md).

Contract: `export_joint_graph` records, node by node, every fact torch 2.13's
partitioner reads from an FX joint graph: the node's op/target/args/kwargs,
`meta["val"]` (with size hints, storage identity and free symbols), the
partitioner's meta keys, impurity, and for each distinct target its schema facts
(mutability, view-ness, returns, tags). The document is built as plain Python
containers and serialized once, so a single buffer crosses into C++.

Objects the format cannot express become {"opaque": repr, "handle": k}; `k`
indexes the caller's `handles` list, which `import_graph` uses to recover the
exact object in the same process.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Optional, Sequence

import orjson
import torch
import torch.fx as fx

from torch._library.fake_class_registry import FakeScriptObject
from torch._library.opaque_object import is_opaque_value
from torch.fx.experimental._backward_state import BackwardState
from torch.fx.experimental.symbolic_shapes import (
    free_symbols,
    is_symbol_binding_fx_node,
    optimization_hint,
)

from ._targets import register_target, target_name

FORMAT_JOINT = "remat.joint_graph"
FORMAT_VERSION = 1

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# The op tags the partitioner reads, by their format-v1 spelling.
_TAGS = {torch.Tag.pointwise: "pointwise", torch.Tag.nondeterministic_seeded: "nondeterministic_seeded"}


def _strip_torch(x: Any) -> str:
    s = str(x)
    return s[6:] if s.startswith("torch.") else s


def dtype_name(dtype: torch.dtype) -> str:
    return _strip_torch(dtype)


# dtype -> format name, filled for the dtypes torch defines at import time.
_DTYPE_NAMES: dict[torch.dtype, str] = {
    d: dtype_name(d) for d in vars(torch).values() if isinstance(d, torch.dtype)
}


class _Exporter:
    def __init__(self, handles: Optional[list]) -> None:
        self.handles = handles
        self.ops: dict[str, dict] = {}
        # Storage identity as StorageWeakRef defines it (the StorageImpl
        # address, `cdata`), read without making a weak reference: every
        # storage stays alive for the whole export, held by node meta. Dense
        # ids in first-seen (FX) order keep the output deterministic.
        self.storages: dict[int, int] = {}
        # Per-export caches keyed by id(): targets and devices are few and
        # alive for the whole export (the graph holds them), and ids skip
        # OpOverload's Python-level __hash__.
        self.names: dict[int, str] = {}
        self.impure: dict[int, bool] = {}
        self.devices: dict[torch.device, str] = {}
        # Set by value() when the value holds a non-int size, stride, storage
        # offset or sym value: only then can it have free symbols.
        self.symbolic = False

    # --- ops -------------------------------------------------------------
    def op(self, target: Any) -> str:
        name = self.names.get(id(target))
        if name is None:
            name = target_name(target)
            self.names[id(target)] = name
            if name not in self.ops:
                self.ops[name] = _op_facts(name, target)
                register_target(name, target)
        return name

    def is_impure(self, n: fx.Node) -> bool:
        """Node.is_impure(impure_random=False), computed once per target.

        For call_function nodes torch's answer depends only on the target and
        process-wide registries, except for higher-order operators
        (auto_functionalized reads its first argument), which are never cached.
        """
        op = n.op
        if op == "placeholder" or op == "output":
            return True
        if op == "get_attr":
            return False
        if op != "call_function":
            return n.is_impure(impure_random=False)
        target = n.target
        impure = self.impure.get(id(target))
        if impure is None:
            impure = n.is_impure(impure_random=False)
            if not isinstance(target, torch._ops.HigherOrderOperator):
                self.impure[id(target)] = impure
        return impure

    # --- args ------------------------------------------------------------
    def opaque(self, x: Any) -> dict:
        handle = -1
        if self.handles is not None:
            handle = len(self.handles)
            self.handles.append(x)
        return {"opaque": repr(x), "handle": handle}

    def arg(self, x: Any) -> Any:
        # The common exact types first (no subclasses: bool is an int, FX's
        # immutable containers subclass list/dict).
        t = type(x)
        if t is fx.Node:
            return {"node": x.name}
        if t is int:
            return x if _INT64_MIN <= x <= _INT64_MAX else self.opaque(x)
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return x if _INT64_MIN <= x <= _INT64_MAX else self.opaque(x)
        if isinstance(x, float):
            if math.isfinite(x):
                return x
            return {"float": "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")}
        if isinstance(x, fx.Node):
            return {"node": x.name}
        if isinstance(x, tuple):
            return {"tuple": [self.arg(v) for v in x]}
        if isinstance(x, list):
            return [self.arg(v) for v in x]
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x):
                return {"dict": {k: self.arg(v) for k, v in x.items()}}
            return self.opaque(x)
        if isinstance(x, slice):
            return {"slice": [self.arg(x.start), self.arg(x.stop), self.arg(x.step)]}
        if isinstance(x, torch.dtype):
            return {"dtype": dtype_name(x)}
        if isinstance(x, torch.device):
            return {"device": str(x)}
        if isinstance(x, torch.layout):
            return {"layout": _strip_torch(x)}
        if isinstance(x, torch.memory_format):
            return {"memory_format": _strip_torch(x)}
        if isinstance(x, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
            return {"target": self.op(x)}
        return self.opaque(x)

    # --- values ----------------------------------------------------------
    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        as_int = d.node.maybe_as_int()
        if as_int is not None:
            return as_int
        return {"expr": str(d.node.expr), "hint": _sym_hint(d)}

    def value(self, v: Any) -> dict:
        if isinstance(v, torch.Tensor):  # FakeTensor: a subclass
            return self.tensor(v)
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self.symbolic = True
        if isinstance(v, torch.SymInt):
            return {"kind": "symint", "expr": str(v.node.expr), "hint": _sym_hint(v)}
        if isinstance(v, torch.SymFloat):
            return {"kind": "symfloat", "expr": str(v.node.expr), "hint": _sym_hint(v)}
        if isinstance(v, torch.SymBool):
            return {"kind": "symbool", "expr": str(v.node.expr), "hint": _sym_hint(v)}
        if isinstance(v, (list, tuple)):
            return {"kind": "sequence", "items": [self.value(x) for x in v]}
        if isinstance(v, dict):
            return {"kind": "dict", "items": {str(k): self.value(x) for k, x in v.items()}}
        # FakeScriptObject first: the reference orders saved opaque objects by
        # that isinstance even when the object is also an opaque value.
        if isinstance(v, (torch.ScriptObject, FakeScriptObject)):
            return {"kind": "script_object"}
        if is_opaque_value(v):
            return {"kind": "opaque", "repr": _safe_repr(v)}
        if isinstance(v, BackwardState):
            return {"kind": "backward_state"}
        if v is None:
            return {"kind": "none"}
        return {"kind": "constant", "repr": _safe_repr(v)}

    def tensor(self, t: torch.Tensor) -> dict:
        dim = self.dim
        shape = t.shape
        symbolic = not _all_ints(shape)
        out: dict[str, Any] = {
            "kind": "tensor",
            "dtype": _DTYPE_NAMES.get(t.dtype) or dtype_name(t.dtype),
            "shape": [dim(d) for d in shape] if symbolic else list(shape),
        }
        try:
            stride = t.stride()
        except (RuntimeError, NotImplementedError):
            pass  # sparse and other layouts without strides
        else:
            sym_stride = not _all_ints(stride)
            out["stride"] = [dim(d) for d in stride] if sym_stride else list(stride)
            if not symbolic:
                try:
                    symbolic = sym_stride or type(t.storage_offset()) is not int
                except (RuntimeError, NotImplementedError):
                    symbolic = True  # let free_symbols decide
        if symbolic:
            self.symbolic = True
        device = t.device
        dev = self.devices.get(device)
        if dev is None:
            dev = self.devices[device] = str(device)
        out["device"] = dev
        # As torch._inductor.fx_utils.get_node_storage: no storage, no identity.
        if torch._C._has_storage(t):
            storages = self.storages
            out["storage"] = storages.setdefault(t.untyped_storage()._cdata, len(storages))
        else:
            out["storage"] = -1
        numel = t.numel()
        out["numel_hint"] = numel if type(numel) is int else optimization_hint(numel, fallback=4096)
        return out

    # --- nodes -----------------------------------------------------------
    def node(self, n: fx.Node) -> dict:
        op = n.op
        if op == "call_function":
            target = self.op(n.target)
        elif op == "output":
            target = "output"
        else:
            target = str(n.target)
        arg = self.arg
        kwargs = n.kwargs
        out: dict[str, Any] = {
            "name": n.name,
            "op": op,
            "target": target,
            "args": [arg(a) for a in n.args],
            "kwargs": {k: arg(v) for k, v in kwargs.items()} if kwargs else {},
        }
        meta = n.meta
        if "val" in meta:
            val = meta["val"]
            self.symbolic = False
            out["val"] = self.value(val)
            if self.symbolic:
                syms = _free_symbol_names(val)
                if syms:
                    out["free_symbols"] = syms
            # is_symbol_binding_fx_node answers None for anything but a SymInt.
            if isinstance(val, torch.SymInt):
                bound = is_symbol_binding_fx_node(n)
                if bound is not None:
                    out["binds_symbol"] = str(bound)
        if "tensor_meta" in meta:
            out["tensor_meta"] = True
        if self.is_impure(n):
            out["impure"] = True
        m = _partitioner_meta(meta)
        if m:
            out["meta"] = m
        return out


def _safe_repr(v: Any) -> str:
    try:
        return repr(v)
    except Exception:  # a repr must never fail an export
        return f"<{type(v).__qualname__}>"


def _sym_hint(s: Any) -> Any:
    """The size hint of a SymInt/SymFloat/SymBool; None when it has none (unbacked)."""
    node = s.node
    if not node.has_hint():
        return None
    if isinstance(s, torch.SymInt):
        return optimization_hint(s)
    h = node.hint
    return bool(h) if isinstance(s, torch.SymBool) else float(h)


def _free_symbol_names(val: Any) -> list[str]:
    # free_symbols() walks tensors, sym values and sequences of them; other
    # values (script objects, BackwardState, constants) have none.
    if not _has_exprs(val):
        return []
    return sorted(s.name for s in free_symbols(val))


def _all_ints(dims: Any) -> bool:
    for d in dims:
        if type(d) is not int:
            return False
    return True


def _has_exprs(val: Any) -> bool:
    if isinstance(val, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(val, (list, tuple)):
        return any(_has_exprs(x) for x in val)
    return False


# torch.fx.traceback.MEMORY_BUDGET_ANNOTATION_KEY (torch 2.13).
_REGION_BUDGET_KEY = "_region_activation_memory_budget"


def _partitioner_meta(meta: dict) -> dict:
    out: dict[str, Any] = {}
    policy = meta.get("recompute")
    if policy is not None:
        out["recompute"] = getattr(policy, "name", str(policy))
    if "ac_graph_id" in meta:
        out["ac_graph_id"] = meta["ac_graph_id"]
    tag = meta.get("partitioner_tag")
    if tag is not None:
        out["partitioner_tag"] = str(tag)
    if "has_backward_hook" in meta:
        out["has_backward_hook"] = bool(meta["has_backward_hook"])
    if "saved_tensor_with_no_vc_check" in meta:
        out["saved_tensor_with_no_vc_check"] = bool(meta["saved_tensor_with_no_vc_check"])
    # The reference honors only a float budget (isinstance(..., float)).
    budget = meta.get("memory_budget")
    if isinstance(budget, float):
        out["memory_budget"] = budget
    # torch.autograd.graph.region_activation_memory_budget's annotation, read
    # as torch.fx.traceback._get_memory_budget_annotation does.
    custom = meta.get("custom")
    if isinstance(custom, dict):
        region = custom.get(_REGION_BUDGET_KEY)
        if region is not None:
            out["region_memory_budget"] = float(region)
    return out


def _op_facts(name: str, target: Any) -> dict:
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
        packet = target.overloadpacket
        ns = target.namespace
        packet_tags: set[str] = set()
        for ov_name in packet.overloads():
            for tag in getattr(packet, ov_name).tags:
                if tag in _TAGS:
                    packet_tags.add(_TAGS[tag])
        return {
            "name": name,
            "kind": "overload",
            "namespace": ns,
            "packet": f"{ns}.{target._opname}",
            "mutable": bool(schema.is_mutable),
            "view": bool(target.is_view),
            "returns": len(schema.returns),
            "tags": sorted(_TAGS[t] for t in target.tags if t in _TAGS),
            "packet_tags": sorted(packet_tags),
            "mutable_args": [
                a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write
            ],
        }
    if isinstance(target, torch._ops.HigherOrderOperator):
        return {
            "name": name,
            "kind": "higher_order",
            "namespace": "higher_order",
            "packet": name,
            "mutable": False,
            "view": False,
            "tags": sorted(_TAGS[t] for t in getattr(target, "tags", ()) if t in _TAGS),
            "packet_tags": [],
            "mutable_args": [],
        }
    return {
        "name": name,
        "kind": "function",
        "namespace": name.rpartition(".")[0],
        "packet": name,
        "mutable": False,
        "view": False,
        "tags": [],
        "packet_tags": [],
        "mutable_args": [],
    }


def _as_int(value: Any, field: str) -> int:
    """`value` as an int, refusing what int() would silently convert ('1', 1.5):
    torch slices and indexes with these, which only ints survive."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{field} must be an int, not {type(value).__name__} "
                        f"({value!r})") from None


def export_joint_graph(
    gm: fx.GraphModule | fx.Graph,
    num_fwd_outputs: int,
    static_lifetime_input_indices: Optional[Sequence[int]] = None,
    *,
    as_json: bool = False,
    handles: Optional[list] = None,
) -> dict | bytes:
    """Exports an FX joint graph as a format-v1 joint-graph document.

    Returns the document as a dict, or as JSON bytes when `as_json`. Pass a
    list as `handles` to keep the objects behind opaque arguments (their
    "handle" indexes it); without one, handles are -1.
    """
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    ex = _Exporter(handles)
    nodes = [ex.node(n) for n in graph.nodes]
    doc = {
        "format": FORMAT_JOINT,
        "version": FORMAT_VERSION,
        "num_fwd_outputs": _as_int(num_fwd_outputs, "num_fwd_outputs"),
        "static_lifetime_input_indices": [_as_int(i, "static_lifetime_input_indices")
                                          for i in (static_lifetime_input_indices or [])],
        "ops": list(ex.ops.values()),
        "nodes": nodes,
    }
    return orjson.dumps(doc) if as_json else doc


def export_graph_nodes(graph: fx.Graph, *, handles: Optional[list] = None) -> tuple[list, list]:
    """The node and op lists of any FX graph (a forward or backward graph)."""
    ex = _Exporter(handles)
    nodes = [ex.node(n) for n in graph.nodes]
    return nodes, list(ex.ops.values())


__all__ = ["export_joint_graph", "export_graph_nodes", "dtype_name"]
