"""FX joint graph -> format-v1 document (docs/format.md).

Contract: `export_joint_graph` records, node by node, every fact torch 2.13's
partitioner reads from an FX joint graph: the node's op/target/args/kwargs,
`meta["val"]` (with size hints, storage identity and free symbols), the
partitioner's meta keys, impurity, and for each distinct target its schema facts
(mutability, view-ness, returns, tags); the graph modules nested in the joint
module go under "subgraphs" the same way. The document is built as plain Python
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

import remat

from torch._library.fake_class_registry import FakeScriptObject
from torch._library.opaque_object import is_opaque_value
from torch.fx.experimental._backward_state import BackwardState
from torch.nested._internal.nested_int import NestedIntNode
from torch.fx.experimental.symbolic_shapes import (
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
        # (expression, kind) -> (printed expression, hint, free symbol names,
        # the int it is when it is a number, else None). Printing a sympy
        # expression costs ~1 ms; a dynamic graph repeats a few dozen distinct
        # ones in thousands of shapes and strides, so each is printed (and its
        # symbols named, its number-ness decided) once.
        self.exprs: dict[tuple, tuple[str, Any, tuple[str, ...], Optional[int]]] = {}
        # The same facts by id() of the SymNode (alive for the whole export,
        # held by node meta): fake tensors share SymNodes, and this skips
        # resolving and hashing the expression again.
        self.by_symnode: dict[int, tuple] = {}
        # The free symbols of the value being exported, collected by sym()
        # from every expression torch's free_symbols() would visit.
        self.syms: set[str] = set()

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
    def facts(self, s: Any) -> tuple:
        """The cached (expression, hint, free symbol names, int or None) of a
        SymInt/SymFloat/SymBool that is not a nested int."""
        node = s.node
        hit = self.by_symnode.get(id(node))
        if hit is not None:
            return hit
        key = (node.expr, type(s))
        hit = self.exprs.get(key)
        if hit is None:
            expr = key[0]
            as_int = int(expr) if isinstance(s, torch.SymInt) and expr.is_number else None
            names = tuple(sym.name for sym in expr.free_symbols)
            hit = self.exprs[key] = (str(expr), _sym_hint(s), names, as_int)
        self.by_symnode[id(node)] = hit
        return hit

    def sym(self, s: Any) -> tuple[str, Any]:
        """(expression, hint) of a sym value; its free symbols join the value's."""
        if isinstance(s.node, NestedIntNode):
            return _sym_expr(s), _sym_hint(s)  # not symbolic: no free symbols
        hit = self.facts(s)
        if hit[2]:
            self.syms.update(hit[2])
        return hit[0], hit[1]

    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        if isinstance(d.node, NestedIntNode):
            return {"expr": _sym_expr(d), "hint": _sym_hint(d)}
        expr, hint, names, as_int = self.facts(d)
        if as_int is not None:
            return as_int  # as SymNode.maybe_as_int: a number has no symbols
        if names:
            self.syms.update(names)
        return {"expr": expr, "hint": hint}

    def value(self, v: Any) -> dict:
        if isinstance(v, torch.Tensor):  # FakeTensor: a subclass
            return self.tensor(v)
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            expr, hint = self.sym(v)
            kind = "symint" if isinstance(v, torch.SymInt) else (
                "symfloat" if isinstance(v, torch.SymFloat) else "symbool")
            return {"kind": kind, "expr": expr, "hint": hint}
        if isinstance(v, (list, tuple)):
            return {"kind": "sequence", "items": [self.value(x) for x in v]}
        if isinstance(v, dict):
            return {"kind": "dict", "items": {str(k): self.value(x) for k, x in v.items()}}
        # FakeScriptObject first: the reference orders saved opaque objects by
        # that isinstance even when the object is also an opaque value.
        if isinstance(v, (torch.ScriptObject, FakeScriptObject)):
            return {"kind": "script_object"}
        if isinstance(v, torch.Generator):
            # A graph-safe RNG input's state (an opaque value to torch, with
            # a kind of its own): its device, and a handle so that the import
            # gives back the very object (torch copies it from a HOP body's
            # placeholder to the outer graph's).
            out = {"kind": "generator", "device": str(v.device)}
            if self.handles is not None:
                out["handle"] = len(self.handles)
                self.handles.append(v)
            return out
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
            try:
                offset = t.storage_offset()
            except (RuntimeError, NotImplementedError):
                offset = 0
            if type(offset) is not int:
                self.sym(offset)  # not exported, but its symbols are the value's
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
        hint = numel if type(numel) is int else optimization_hint(numel, fallback=4096)
        if type(hint) is not int:
            # A nested tensor's own numel (a multiple of a nested int): torch's
            # _size_of could not size it either. Joint graphs hold dense
            # tensors (AOTAutograd desugars subclasses), so this is refused.
            raise remat.UnsupportedError(
                f"a tensor value whose numel has no integer hint ({numel}); remat sizes "
                "dense tensors only")
        out["numel_hint"] = hint
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
            self.syms = set()
            out["val"] = self.value(val)
            if self.syms:
                out["free_symbols"] = sorted(self.syms)
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
    """The size hint of a SymInt/SymFloat/SymBool; None when it has none (unbacked).

    The ragged size of a jagged nested tensor is a SymInt whose hint is
    itself a nested int (``j1``), which has no number: it is written as
    {"nested_int": "j1"}.
    """
    node = s.node
    if isinstance(node, NestedIntNode):
        return {"nested_int": str(s)}
    if not node.has_hint():
        return None
    if isinstance(s, torch.SymInt):
        h = optimization_hint(s)
        if isinstance(h, torch.SymInt) and h.node.is_nested_int():
            return {"nested_int": str(h)}
        return h
    h = node.hint
    return bool(h) if isinstance(s, torch.SymBool) else float(h)


def _sym_expr(s: Any) -> str:
    """The expression of a sym value; a nested int (no sympy expression) by its name."""
    node = s.node
    return str(s) if isinstance(node, NestedIntNode) else str(node.expr)


def _all_ints(dims: Any) -> bool:
    for d in dims:
        if type(d) is not int:
            return False
    return True


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
    # Set by a joint pass (config.joint_custom_pass) to ask for activation
    # offloading; torch tests it for truth.
    if meta.get("should_offload", False):
        out["should_offload"] = True
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


def _export_nodes(ex: _Exporter, graph: fx.Graph) -> list[dict]:
    """Every node's record; a failure names the node (remat.DropInError, step "export")."""
    nodes: list[dict] = []
    append, node = nodes.append, ex.node
    n = None
    try:
        for n in graph.nodes:
            append(node(n))
    except remat.RematError as e:
        # A deliberate refusal (UnsupportedError ...): same class, node named.
        raise type(e)(f"node {getattr(n, 'name', None)!r}: {e}") from e
    except Exception as e:
        name = getattr(n, "name", None)
        raise remat.DropInError(
            f"remat: cannot export node {name!r} of the joint graph: {type(e).__name__}: {e}",
            step="export", node=name) from e
    return nodes


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
    "handle" indexes it); without one, handles are -1. The graph modules
    nested in a GraphModule (higher-order ops' bodies) are exported under
    "subgraphs", in `named_modules()` order.
    """
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    ex = _Exporter(handles)
    nodes = _export_nodes(ex, graph)
    doc = {
        "format": FORMAT_JOINT,
        "version": FORMAT_VERSION,
        "num_fwd_outputs": _as_int(num_fwd_outputs, "num_fwd_outputs"),
        "static_lifetime_input_indices": [_as_int(i, "static_lifetime_input_indices")
                                          for i in (static_lifetime_input_indices or [])],
        "ops": list(ex.ops.values()),
        "nodes": nodes,
    }
    # Graph modules nested in the joint module (HOP bodies): torch's
    # partitioner reads their memory-budget annotations.
    if isinstance(gm, fx.GraphModule):
        subgraphs = [{"name": name, "nodes": _export_nodes(ex, sub.graph)}
                     for name, sub in gm.named_modules()
                     if isinstance(sub, fx.GraphModule) and sub.graph is not graph]
        if subgraphs:
            doc["ops"] = list(ex.ops.values())  # the bodies' ops too
            doc["subgraphs"] = subgraphs
    mutated = _mutated_inputs(graph)
    if mutated:
        doc["mutated_inputs"] = mutated
    return orjson.dumps(doc) if as_json else doc


def _mutated_inputs(graph: fx.Graph) -> list[str]:
    """Placeholders AOTAutograd's runtime mutates after the forward returns.

    The joint graph returns the new value of such an input as an output whose
    descriptor (output node meta["desc"]) is an InputMutationAOTOutput naming
    the input's descriptor (placeholder meta["desc"]).
    """
    from torch._functorch._aot_autograd.descriptors import InputMutationAOTOutput

    outputs = list(graph.find_nodes(op="output"))
    if not outputs:
        return []
    descs = outputs[0].meta.get("desc") or ()
    mutated = [d.mutated_input for d in descs if isinstance(d, InputMutationAOTOutput)]
    if not mutated:
        return []
    return [n.name for n in graph.find_nodes(op="placeholder") if n.meta.get("desc") in mutated]


def export_graph_nodes(graph: fx.Graph, *, handles: Optional[list] = None) -> tuple[list, list]:
    """The node and op lists of any FX graph (a forward or backward graph)."""
    ex = _Exporter(handles)
    nodes = _export_nodes(ex, graph)
    return nodes, list(ex.ops.values())


__all__ = ["export_joint_graph", "export_graph_nodes", "dtype_name"]
