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
import struct
from typing import Any, Optional, Sequence

import orjson
import torch
import torch.fx as fx

import remat

from ._internals import (
    BackwardState,
    FakeScriptObject,
    HigherOrderOperator,
    NestedIntNode,
    OpOverload,
    OpOverloadPacket,
    is_opaque_value,
    optimization_hint,
    placeholder_expr,
    symbol_bindings,
)

from . import _internals
from ._targets import register_target, target_name

FORMAT_JOINT = "remat.joint_graph"
FORMAT_VERSION = 1

_PYTHON_NAN_BITS = struct.pack(">d", float("nan")).hex()

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


# Process-wide, across exports: an op target's name and facts, and a
# symbolic expression's printed form, free symbols and number-ness, never
# change, and a compile exports graph after graph with the same ops and the
# same few symbolic sizes. Reading an op's schema and tags and printing a
# sympy expression cost more than all else in a small graph's export, so
# each is done once per process. The hints stay per export (they are the
# ShapeEnv's). Bounded: a full cache is emptied.
_TARGETS: dict[int, tuple[Any, str, dict]] = {}  # id(target) -> (target, name, facts)
_EXPRS: dict[tuple, tuple[str, tuple[str, ...], Optional[int]]] = {}
# A raw expression's free symbols' names, and a bound symbol's printed name
# (both pure functions of the sympy expression).
_RAW_NAMES: dict[Any, tuple[str, ...]] = {}
_SYMBOL_TEXT: dict[Any, str] = {}
_CACHE_LIMIT = 1 << 14


def _remember(cache: dict, key: Any, value: Any) -> Any:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


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
        # symbols named, its number-ness decided) once, and once per process
        # (_EXPRS) but for the hint.
        self.exprs: dict[tuple, tuple[str, Any, tuple[str, ...], Optional[int]]] = {}
        # The same facts by id() of the SymNode (alive for the whole export,
        # held by node meta): fake tensors share SymNodes, and this skips
        # resolving and hashing the expression again.
        self.by_symnode: dict[int, tuple] = {}
        # The free symbols of the value being exported, collected by sym()
        # from every expression torch's free_symbols() would visit; and those
        # of the same expressions before ShapeEnv's replacements (raw_syms).
        self.syms: set[str] = set()
        self.raw_syms: set[str] = set()
        # Raw-expression symbol names by id() of the SymNode (each SymNode
        # has its own raw expression, however its replaced one is shared).
        self.raw_by_symnode: dict[int, tuple[str, ...]] = {}

    # --- ops -------------------------------------------------------------
    def op(self, target: Any) -> str:
        name = self.names.get(id(target))
        if name is None:
            known = _TARGETS.get(id(target))
            if known is None or known[0] is not target:  # an id reused by another object
                name = target_name(target)
                known = _remember(_TARGETS, id(target), (target, name, _op_facts(name, target)))
            name = known[1]
            self.names[id(target)] = name
            if name not in self.ops:
                self.ops[name] = dict(known[2])  # the document's own copy
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
            if not isinstance(target, HigherOrderOperator):
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
            if not math.isnan(x):
                return {"float": "inf" if x > 0 else "-inf"}
            # A NaN keeps its sign and payload (CSE compares constants by
            # bit pattern from torch 2.14 on); float("nan") needs no bits.
            bits = struct.pack(">d", x).hex()
            return {"float": "nan"} if bits == _PYTHON_NAN_BITS else {"float": "nan", "bits": bits}
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
        if isinstance(x, (OpOverload, HigherOrderOperator)):
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
            text = _EXPRS.get(key)
            if text is None:
                expr = key[0]
                as_int = int(expr) if isinstance(s, torch.SymInt) and expr.is_number else None
                names = tuple(sym.name for sym in expr.free_symbols)
                text = _remember(_EXPRS, key, (str(expr), names, as_int))
            hit = self.exprs[key] = (text[0], _sym_hint(s), text[1], text[2])
        self.by_symnode[id(node)] = hit
        return hit

    def raw(self, node: Any) -> None:
        """The symbols of a SymNode's raw expression join the value's raw ones."""
        names = self.raw_by_symnode.get(id(node))
        if names is None:
            raw = placeholder_expr(node)
            names = _RAW_NAMES.get(raw)
            if names is None:
                names = _remember(_RAW_NAMES, raw, tuple(
                    sym.name for sym in getattr(raw, "free_symbols", ())))
            self.raw_by_symnode[id(node)] = names
        if names:
            self.raw_syms.update(names)

    def sym(self, s: Any) -> tuple[str, Any]:
        """(expression, hint) of a sym value; its free symbols join the value's."""
        if isinstance(s.node, NestedIntNode):
            return _sym_expr(s), _sym_hint(s)  # not symbolic: no free symbols
        hit = self.facts(s)
        if hit[2]:
            self.syms.update(hit[2])
        self.raw(s.node)
        return hit[0], hit[1]

    def dim(self, d: Any) -> Any:
        if isinstance(d, int):
            return d
        if isinstance(d.node, NestedIntNode):
            return {"expr": _sym_expr(d), "hint": _sym_hint(d)}
        expr, hint, names, as_int = self.facts(d)
        self.raw(d.node)  # a raw expression keeps its symbols even when replaced by a number
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
        if isinstance(v, torch.device):
            # An op that returns a device (compile-on-one-rank's
            # current_device): torch 2.15 sizes it 0 and never bans it.
            return {"kind": "device", "device": str(v)}
        out = {"kind": "constant", "repr": _safe_repr(v)}
        if not isinstance(v, (int, float, bool)):
            # torch's free_symbols cannot read it (an Enum member in 2.11, a
            # string ...): extraction asserts if such a value is saved.
            out["scalar"] = False
        return out

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
        if _internals.has_storage(t):
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
            self.raw_syms = set()
            out["val"] = self.value(val)
            if self.syms:
                out["free_symbols"] = sorted(self.syms)
            # torch 2.14 on also reads the raw expressions (before ShapeEnv's
            # replacements): their symbols, and what a node binds by them.
            extra = self.raw_syms - self.syms
            if extra:
                out["free_symbols_unreplaced"] = sorted(self.raw_syms)
            if isinstance(val, torch.SymInt):
                bound, bound_raw = symbol_bindings(n)
                if bound is not None:
                    out["binds_symbol"] = _symbol_text(bound)
                if bound_raw != bound:
                    out["binds_symbol_unreplaced"] = None if bound_raw is None else _symbol_text(bound_raw)
        if "tensor_meta" in meta:
            out["tensor_meta"] = True
        if self.is_impure(n):
            out["impure"] = True
        if op == "call_function" and _is_stream_sync(n):
            out["stream_sync"] = True
        m = _partitioner_meta(meta)
        if m:
            out["meta"] = m
        return out


def _is_stream_sync(n: fx.Node) -> bool:
    """A control_deps call whose subgraph (the get_attr module it runs) calls
    one of torch's stream synchronization ops."""
    target = n.target
    if not (isinstance(target, _internals.HigherOrderOperator) and target.name() == "control_deps"
            and len(n.args) >= 2):
        return False
    sg_node, owner = n.args[1], n.graph.owning_module
    if not (isinstance(sg_node, fx.Node) and sg_node.op == "get_attr" and owner is not None):
        return False
    sg = getattr(owner, str(sg_node.target), None)
    sync = _internals.stream_sync_ops()
    return isinstance(sg, fx.GraphModule) and any(
        x.op == "call_function" and x.target in sync for x in sg.graph.nodes)


def _safe_repr(v: Any) -> str:
    try:
        return repr(v)
    except Exception:  # a repr must never fail an export
        return f"<{type(v).__qualname__}>"


def _symbol_text(symbol: Any) -> str:
    """str() of a sympy symbol, printed once per process (_SYMBOL_TEXT)."""
    text = _SYMBOL_TEXT.get(symbol)
    return text if text is not None else _remember(_SYMBOL_TEXT, symbol, str(symbol))


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
    # Stamped by torch 2.15's graph_compile on a primal whose data the runtime
    # epilogue overwrites after the forward; torch tests it for truth. (An
    # older torch stamps nothing: the key is exported wherever it is set.)
    if meta.get("aot_runtime_epilogue_input_mutation", False):
        out["aot_runtime_epilogue_input_mutation"] = True
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
        # fx_graph_cse's custom_context_key (torch 2.14 on): nodes of another
        # stream or memory pool are never merged.
        context = (custom.get("stream", 0), custom.get("mempool"), custom.get("mempool_device"))
        if context != (0, None, None):
            out["custom_context"] = [_context_item(v) for v in context]
    return out


def _context_item(v: Any) -> Any:
    """A stream / memory-pool index as JSON: an int (a bool is one to Python's
    ==), None, or another value by its repr."""
    if v is None:
        return None
    if isinstance(v, int) and _INT64_MIN <= v <= _INT64_MAX:
        return int(v)
    return _safe_repr(v)


def _op_facts(name: str, target: Any) -> dict:
    if isinstance(target, OpOverload):
        schema = target._schema
        packet = target.overloadpacket
        ns = target.namespace
        packet_tags: set[str] = set()
        for ov_name in packet.overloads():
            for tag in getattr(packet, ov_name).tags:
                if tag in _TAGS:
                    packet_tags.add(_TAGS[tag])
        facts = {
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
        dropout = _dropout_p(schema)
        if dropout is not None:
            facts["dropout_p"] = dropout
        return facts
    if isinstance(target, OpOverloadPacket):
        # torch's OpOverload checks do not apply to a packet; its tags are
        # those of its .default overload, which torch 2.13's is_impure asks.
        default = getattr(target, "default", None)
        packet_tags = {_TAGS[t] for ov in target.overloads() for t in getattr(target, ov).tags
                       if t in _TAGS}
        return {
            "name": name,
            "kind": "packet",
            "namespace": name.partition(".")[0],
            "packet": name,
            "mutable": False,
            "view": False,
            "tags": sorted(_TAGS[t] for t in (default.tags if default is not None else ())
                           if t in _TAGS),
            "packet_tags": sorted(packet_tags),
            "mutable_args": [],
        }
    if isinstance(target, HigherOrderOperator):
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


def _dropout_p(schema: Any) -> Optional[dict]:
    """The schema argument named dropout_p (the attention ops): its position
    and default, which torch 2.14 on reads to tell whether a seeded op is
    random (partitioners.is_rng_op: not when dropout is statically zero).
    The engine decides from the node's argument and these facts."""
    for index, a in enumerate(schema.arguments):
        if a.name == "dropout_p":
            out: dict[str, Any] = {"index": index}
            # Without a default, torch counts the op random when the node omits it.
            default = a.default_value
            if isinstance(default, (int, float)):
                default = float(default)
                if not math.isfinite(default):
                    default = "nan" if math.isnan(default) else ("inf" if default > 0 else "-inf")
                out["default"] = default
            return out
    return None


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
        # The release whose partitioner the graph was handed to (the CLI
        # reproduces that one unless told otherwise).
        "torch_version": torch.__version__,
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
    InputMutationAOTOutput = _internals.descriptors().InputMutationAOTOutput

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
