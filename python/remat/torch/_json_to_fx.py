"""Format-v1 documents -> FX graphs.

Contract:
  * `import_graph` builds an FX GraphModule whose nodes have the document's
    names, ops, targets (resolved back to callables), args and kwargs.
  * With `joint_gm`, node meta comes from the joint graph the way torch's own
    extraction does it: a placeholder gets the joint node's meta dict itself,
    any other node a shallow copy (`copy.copy`). The joint node is the one named
    by the document node's "origin", or, for a joint-graph document, the one of
    the same name. Activation offloading's "saved_for_offloading" mark is set
    on top, as torch sets it. Nodes with no joint counterpart get their meta
    rebuilt from the document: the partitioner keys, offloading's keys
    ("original_device" as a torch.device, sizes as tuples), "val" for tensors
    (fake tensors in the joint graph's FakeTensorMode; symbolic sizes become
    the joint graph's SymInts of the same expression, and without one the
    op is run on its inputs' fake values, as torch's rewrites do) and
    "tensor_meta" (FX shape propagation's record in a joint graph, the fake
    tensor record torch's rewrites give the nodes they create); no key of
    remat's own. A backward placeholder a rewrite
    created with the name of a created forward node takes a copy of that
    node's meta, as torch's FP8 quantization gives it. A result graph's
    output node starts with empty meta (torch's extraction makes a new one).
  * `import_result` builds the forward and backward modules of a partition
    result as `_extract_fwd_bwd_modules` does: modules made with
    `_make_graph_module(joint_gm, graph)`, output "desc" metadata from the joint
    output plus SavedForBackwards(NoVcCheck)AOTOutput for saved values (and,
    2.12 on, "output_stack_traces" of the values extraction returned), except
    on a forward output the CPU-style RNG rewrite rebuilt (no meta, as
    torch's); the value getitem of each run_and_save_rng_state gets a copy of
    the random op's meta, as functionalize_rng_ops gives it; and, 2.13 on,
    meta["autograd_backward"] on backward call_function/get_attr nodes that
    come from the joint graph (not on nodes a rewrite created), and
    invoke_subgraph calls the partitioner gave extra inputs (HOP RNG states)
    their "eager_input_vals" extended with those inputs' values.
  * `stamp_static_inputs` marks the joint graph's primal placeholders
    meta["is_static_input"] as torch 2.15's extraction does (the drop-in
    calls it for 2.15 on); `stamp_mutation_regions` numbers every joint
    node's meta["mutation_region_id"] as torch's CSE pass does (the drop-in
    calls it before importing a min-cut partition with config.cse).
  * Opaque arguments resolve through `handles` (the list given to the export);
    without it they become `OpaqueArg` placeholders carrying the repr.
  * A document is checked before FX writes code from it (docs/format.md
    "Trust"; _doc_checks): names, targets, kwargs keys and get_attr paths
    are checked identifiers, arguments checked literals, ops with effects
    outside tensors refused unless `trusted`, symbolic arithmetic bounded;
    every failure of import_graph / import_result is a RematError naming the
    node and field. `import_own_result`, the drop-in's, leaves those checks
    out: its result is the engine's, made in this process from the live
    joint graph's export, never a document from outside.
"""

from __future__ import annotations

import copy
import functools
import math
import struct
from typing import Any, Optional

import orjson
import torch
import torch.fx as fx
from torch.fx.immutable_collections import immutable_dict

from ..errors import InvalidGraphError, ParseError, RematError
from . import _doc_checks as _checks
from . import _internals, _release
from ._targets import UntrustedTargetError, resolve_target


class OpaqueArg:
    """An argument the document only knows by its repr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        # Valid Python, so FX code generation of the imported graph succeeds.
        return f"remat_opaque({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueArg) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MAX_DEPTH = 64  # nesting of one argument (torch's graphs: a few levels)
_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
# The tagged-argument objects of docs/format.md: tag -> the keys it may have.
_TAGS = {"node": {"node"}, "tuple": {"tuple"}, "dict": {"dict"}, "slice": {"slice"},
         "float": {"float", "bits"}, "dtype": {"dtype"}, "device": {"device"},
         "layout": {"layout"}, "memory_format": {"memory_format"}, "target": {"target"},
         "opaque": {"opaque", "handle"}}


def _load(doc: Any) -> dict:
    if isinstance(doc, (bytes, bytearray, memoryview, str)):
        try:
            return orjson.loads(doc)
        except orjson.JSONDecodeError as e:
            raise ParseError(f"not a JSON document: {e}") from None
    return doc


class _Decoder:
    """Document arguments (ARG, docs/format.md) -> FX arguments. Only JSON
    values and the format's tagged objects pass: FX writes every argument
    into the module's source, by repr() for what is no node or op, so each
    one must be a literal whose repr is Python (docs/format.md "Trust")."""

    def __init__(self, env: dict[str, fx.Node], handles: Optional[list], trusted: bool) -> None:
        self.env = env
        self.handles = handles
        self.trusted = trusted  # resolve_target's trust (docs/format.md "Trust")
        self.resolved_handle = False  # set when an opaque argument resolved to its object
        self.node = ""  # where errors point: the node and its field being decoded
        self.field = ""

    def fail(self, what: str) -> InvalidGraphError:
        return _checks.fail(self.node, self.field, what)

    def arg(self, a: Any, depth: int = 0, in_dict: bool = False) -> Any:
        t = type(a)
        if t is dict:
            if len(a) == 1:
                name = a.get("node")
                if name is not None:
                    node = self.env.get(name)
                    if node is not None:
                        return node
            return self._tagged(a, depth, in_dict)
        if t is str or t is float or t is bool or a is None:
            return a
        if t is int:
            if _INT64_MIN <= a <= _INT64_MAX:
                return a
            raise self.fail(f"a {a.bit_length()}-bit integer does not fit in a signed 64-bit integer")
        if t is list:
            if depth >= _MAX_DEPTH:
                raise self.fail(f"arguments nested more than {_MAX_DEPTH} deep")
            return [self.arg(x, depth + 1, in_dict) for x in a]
        raise self.fail(f"a {t.__name__} is not a JSON value")

    def _tagged(self, a: dict, depth: int, in_dict: bool) -> Any:
        tag = next((k for k in a if k in _TAGS), None)
        if tag is None or not a.keys() <= _TAGS[tag]:
            raise self.fail(f"not a format-v1 argument object (keys {_checks._shown(sorted(map(str, a)))})")
        if depth >= _MAX_DEPTH:
            raise self.fail(f"arguments nested more than {_MAX_DEPTH} deep")
        v = a[tag]
        if tag == "node":
            if type(v) is not str or v not in self.env:
                raise self.fail(f"refers to {_checks._shown(v)}, which does not exist (before this node)")
            return self.env[v]
        if tag in ("tuple", "slice"):
            if type(v) is not list or (tag == "slice" and len(v) != 3):
                raise self.fail(f"a {tag} is " + ("an array" if tag == "tuple" else "[start, stop, step]"))
            items = [self.arg(x, depth + 1, in_dict) for x in v]
            return tuple(items) if tag == "tuple" else slice(*items)
        if tag == "dict":
            if type(v) is not dict or not all(type(k) is str for k in v):
                raise self.fail("a dict is an object with string keys")
            # FX writes a dict by repr(): its values must be literals too.
            return {k: self.arg(x, depth + 1, True) for k, x in v.items()}
        if tag == "float":
            return self._float(v, a.get("bits"))
        if tag in ("dtype", "layout", "memory_format"):
            kind = {"dtype": torch.dtype, "layout": torch.layout,
                    "memory_format": torch.memory_format}[tag]
            return self._torch_constant(v, kind, tag)
        if tag == "device":
            return self._device(v)
        if tag == "target":
            return self._target(v, in_dict)
        return self._opaque(v, a.get("handle", -1))

    def _float(self, v: Any, bits: Any) -> float:
        if v not in _FLOATS:
            raise self.fail(f"unknown float {_checks._shown(v)} (expected inf, -inf or nan)")
        if bits is None:
            return _FLOATS[v]
        if type(bits) is not str or len(bits) != 16 or not all(c in "0123456789abcdefABCDEF" for c in bits):
            raise self.fail(f"float bits {_checks._shown(bits)} are not 16 hex digits of a NaN")
        x = struct.unpack(">d", bytes.fromhex(bits))[0]  # a NaN with a sign or payload
        if not math.isnan(x):
            raise self.fail(f"float bits {bits!r} are not 16 hex digits of a NaN")
        return x

    def _torch_constant(self, name: Any, kind: type, field: str) -> Any:
        """torch.<name>, only when it is a `kind` (torch.float32, torch.strided,
        torch.channels_last): a file names a constant, never any attribute of torch."""
        value = getattr(torch, name, None) if type(name) is str and name.isidentifier() else None
        if not isinstance(value, kind):
            raise self.fail(f"{field} {_checks._shown(name)} is not a torch.{kind.__name__}")
        return value

    def _device(self, v: Any) -> torch.device:
        if type(v) is not str or len(v) > 64:
            raise self.fail(f"device {_checks._shown(v)} is not a device string")
        try:
            return torch.device(v)
        except (RuntimeError, ValueError) as e:
            raise self.fail(f"device {_checks._shown(v)}: {str(e).splitlines()[0]}") from None

    def _target(self, v: Any, in_dict: bool) -> Any:
        """An op as a value (auto_functionalized's, with_effects'): FX writes
        an OpOverload or higher-order op by its qualified name, anything else
        by repr(), which is no Python; inside a dict, by repr() too."""
        op = _call_target(self.node, v, self.trusted)
        if in_dict or not isinstance(op, (_internals.OpOverload, _internals.HigherOrderOperator)):
            raise self.fail(f"target {_checks._shown(v)}: FX writes only an OpOverload or higher-order "
                            "op as an argument value, and none inside a dict")
        return op

    def _opaque(self, text: Any, h: Any) -> Any:
        if type(text) is not str or (h is not None and type(h) is not int):
            raise self.fail("an opaque argument is {\"opaque\": repr text, \"handle\": integer}")
        if self.handles is not None and h is not None and 0 <= h < len(self.handles):
            self.resolved_handle = True
            return self.handles[h]
        return OpaqueArg(text)

_fake_mode = None


class _Symbols:
    """The joint graph's SymInts by printed expression, to rebuild symbolic sizes.

    Nodes the partitioner created have no joint node to take meta from; their
    document values name symbolic sizes by expression ("s0", "2*s0"), which
    map back to the SymInts the joint graph's fake values hold (the exporter
    prints `str(sym.node.expr)`). Built on first use.
    """

    def __init__(self, joint_gm: Optional[fx.GraphModule]) -> None:
        self._gm = joint_gm
        self._by_expr: Optional[dict[str, Any]] = None
        self.mode: Any = None  # the joint graph's FakeTensorMode
        self._mode_searched = False

    def _build(self) -> None:
        by: dict[str, Any] = {}
        nodes = self._gm.graph.nodes if self._gm is not None else ()
        for n in nodes:
            v = n.meta.get("val")
            for x in v if isinstance(v, (list, tuple)) else (v,):
                if isinstance(x, torch.SymInt):
                    by.setdefault(str(x.node.expr), x)
                elif isinstance(x, torch.Tensor):
                    if self.mode is None:
                        self.mode = getattr(x, "fake_mode", None)
                    try:
                        dims = (*x.shape, *x.stride())
                    except (RuntimeError, NotImplementedError):
                        dims = tuple(x.shape)
                    for d in dims:
                        if isinstance(d, torch.SymInt):
                            by.setdefault(str(d.node.expr), d)
        self._by_expr = by

    def joint_mode(self) -> Any:
        """The FakeTensorMode of the joint graph's values, or None (found
        on the first tensor value, without building the symbol table)."""
        if self.mode is None and self._gm is not None and not self._mode_searched:
            self._mode_searched = True
            for n in self._gm.graph.nodes:
                v = n.meta.get("val")
                for x in v if isinstance(v, (list, tuple)) else (v,):
                    mode = getattr(x, "fake_mode", None) if isinstance(x, torch.Tensor) else None
                    if mode is not None:
                        self.mode = mode
                        return mode
        return self.mode

    def dims(self, dims: list) -> Optional[list]:
        """The document's DIMs as ints and SymInts; None when one is unknown."""
        if all(isinstance(d, int) for d in dims):
            return dims
        if self._by_expr is None:
            self._build()
        out = []
        for d in dims:
            if isinstance(d, int):
                out.append(d)
                continue
            sym = self._by_expr.get(d.get("expr")) if isinstance(d, dict) else None
            if sym is None:
                return None
            out.append(sym)
        return out


_NO_SYMBOLS = _Symbols(None)


def _fake_tensor(v: dict, syms: _Symbols = _NO_SYMBOLS) -> Any:
    """A fake tensor for a tensor VALUE; None when a symbolic size is unknown to `syms`."""
    global _fake_mode
    shape = syms.dims(v.get("shape", []))
    stride = v.get("stride")
    if stride is not None:
        stride = syms.dims(stride)
        if stride is None:
            return None
    if shape is None:
        return None
    dtype = getattr(torch, v["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        return None
    FakeTensorMode = _internals.fake_tensor().FakeTensorMode

    # The joint graph's own mode: inductor refuses to mix two ("Mixing fake
    # modes NYI"), and symbolic sizes only exist there.
    mode = syms.joint_mode()
    if mode is None:
        if not all(isinstance(d, int) for d in (*shape, *(stride or ()))):
            return None
        if _fake_mode is None:
            _fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
        mode = _fake_mode
    with mode:
        if stride is None:
            return torch.empty(shape, dtype=dtype, device=v.get("device", "cpu"))
        return torch.empty_strided(shape, stride, dtype=dtype, device=v.get("device", "cpu"))


def _generator(v: dict, handles: Optional[list]) -> Any:
    """The exported generator itself, or a fresh state of the device's default
    generator (what torch's graph-safe RNG functionalization stores)."""
    h = v.get("handle", -1)
    if handles is not None and h is not None and 0 <= h < len(handles):
        return handles[h]
    return _internals.default_generator_state(torch.device(v["device"]))


def _value(v: dict, syms: _Symbols = _NO_SYMBOLS, handles: Optional[list] = None) -> Any:
    kind = v.get("kind")
    if kind == "tensor":
        return _fake_tensor(v, syms)
    if kind == "sequence":
        items = [_value(x, syms, handles) for x in v["items"]]
        # All or nothing: a partial list would misstate the value's size.
        if any(x is None and it.get("kind") != "none" for x, it in zip(items, v["items"])):
            return None
        return items
    if kind == "none":
        return None
    if kind == "constant":
        try:
            import ast

            return ast.literal_eval(v.get("repr", ""))
        except (ValueError, SyntaxError):
            return None
    if kind == "backward_state":
        return _internals.BackwardState()
    if kind == "generator":
        return _generator(v, handles)
    if kind == "device":
        return torch.device(v["device"])
    return None


def _offload_meta(m: dict, meta: dict, syms: _Symbols) -> None:
    """Activation offloading's meta keys (result graphs) into `meta`."""
    if m.get("saved_for_offloading"):
        meta["saved_for_offloading"] = True
    if "original_device" in m:
        meta["original_device"] = torch.device(m["original_device"])
    for key in ("original_size", "original_stride"):
        if key in m:
            dims = syms.dims(m[key])
            if dims is not None:
                meta[key] = tuple(dims)


def _partitioner_keys_from_doc(m: dict) -> dict:
    """The partitioner's meta keys of a document node's "meta" object, as torch holds them."""
    CheckpointPolicy = _internals.CheckpointPolicy
    meta: dict[str, Any] = {}
    if "recompute" in m:
        meta["recompute"] = CheckpointPolicy[m["recompute"]]
    for key in ("ac_graph_id", "partitioner_tag", "has_backward_hook",
                "saved_tensor_with_no_vc_check", "memory_budget"):
        if key in m:
            meta[key] = m[key]
    if "region_memory_budget" in m:
        meta["custom"] = {"_region_activation_memory_budget": m["region_memory_budget"]}
    if "custom_context" in m:
        stream, mempool, mempool_device = m["custom_context"]
        meta.setdefault("custom", {}).update(
            {"stream": stream, "mempool": mempool, "mempool_device": mempool_device})
    return meta


def _meta_from_doc(nd: dict, syms: _Symbols = _NO_SYMBOLS, joint_doc: bool = False,
                   handles: Optional[list] = None) -> dict:
    m = nd.get("meta") or {}
    meta = _partitioner_keys_from_doc(m)
    # A joint pass's request, read from joint graphs only: a created node of
    # a result (an RNG getitem copies its op's meta) has none in torch.
    if joint_doc and m.get("should_offload"):
        meta["should_offload"] = True
    _offload_meta(m, meta, syms)
    if "val" in nd:
        val = _value(nd["val"], syms, handles)
        if val is not None or nd["val"].get("kind") == "none":
            meta["val"] = val
    if nd.get("tensor_meta"):
        meta["tensor_meta"] = _tensor_meta(meta.get("val"), joint_doc)
    return meta


def _tensor_meta(val: Any, joint_doc: bool) -> Any:
    """A value's meta["tensor_meta"]: in a traced joint graph, FX shape
    propagation's record; on a node a partitioner rewrite created, the fake
    tensor record torch's rewrites give theirs (another type, more fields)."""
    if not isinstance(val, torch.Tensor):
        return None
    if joint_doc:
        from torch.fx.passes.shape_prop import _extract_tensor_metadata

        return _extract_tensor_metadata(val)
    return _internals.fake_tensor().extract_tensor_metadata(val)


# Node.__setattr__ re-indexes the node in the graph's find_nodes table on
# every attribute write; "meta" is not part of that index, so meta is set
# with the plain attribute write.
_set_attr = object.__setattr__


def _build_graph(
    nodes: list[dict],
    joint_gm: Optional[fx.GraphModule],
    handles: Optional[list],
    match_by_name: bool,
    made_by: Optional[dict[str, fx.Node]] = None,
    trusted: bool = False,
    checked: bool = True,
    joint_nodes: Optional[dict[str, fx.Node]] = None,
) -> fx.Graph:
    """Appends the document's nodes to a fresh graph as `Graph.create_node` would.

    `checked=False` leaves out the document checks (_doc_checks: names,
    kwargs keys, get_attr paths, placeholder targets, meta strings, bounded
    arithmetic): only for a result the engine made in this process from the
    live joint graph's export (import_own_result). `joint_nodes`: the joint
    graph's nodes by name, when the caller has them already.

    create_node walks every call's args with pytree only to warn about raw
    SymInt/SymFloat/SymBool arguments; a document argument can hold one only
    through a resolved opaque handle, so just those nodes go through
    create_node. The other nodes get create_node's bookkeeping inline (a
    fresh graph has no owning module, hence no create-node hooks).
    """
    if joint_nodes is None:
        joint_nodes = {n.name: n for n in joint_gm.graph.nodes} if joint_gm is not None else {}
    syms = _Symbols(joint_gm)
    made_by = made_by or {}
    graph = fx.Graph()
    create_name = graph._graph_namespace.create_name
    associate = graph._graph_namespace.associate_name_with_obj
    insert = graph._insert
    index = graph._find_nodes_lookup_table.insert
    Node = fx.Node
    env: dict[str, fx.Node] = {}
    dec = _Decoder(env, handles, trusted)
    arg = dec.arg
    heads = _Heads(nodes, joint_gm)
    bounds = _checks.LiteralBounds()
    kwargs_key = _checks.kwargs_key
    for i, nd in enumerate(nodes):
        op, name = heads.check(i, nd, env) if checked else (nd["op"], nd["name"])
        dec.resolved_handle = False
        dec.node, dec.field = name, "args"
        a = nd.get("args")
        args = tuple([arg(x) for x in a]) if a else ()
        dec.field = "kwargs"
        kw = nd.get("kwargs")
        if not kw:
            kwargs = immutable_dict()
        elif checked:
            kwargs = {kwargs_key(name, k): arg(v) for k, v in kw.items()}
        else:
            kwargs = {k: arg(v) for k, v in kw.items()}
        if op == "output":
            # Named explicitly: a rewrite that replaces the output node leaves
            # FX's new one named "output_1".
            target: Any = "output"
            args, kwargs = (args[0] if args else None,), immutable_dict()
        elif op == "call_function":
            target = _call_target(name, nd.get("target"), trusted)
            if checked:
                bounds.add(name, target, args, kwargs)
        elif not checked:
            target = nd["target"]
        elif op == "placeholder":
            target = heads.placeholder(name, nd.get("target"), args)
        else:
            target = _attribute_path(name, nd.get("target"), heads.root)
        if dec.resolved_handle:
            node = graph.create_node(op, target, args, kwargs, name=name)
        else:
            fx_name = create_name(name, None)
            node = Node(graph, fx_name, op, target, args, kwargs, None)
            associate(fx_name, node)
            insert(node)
            index(node)
            graph._len += 1
        if node.name != name:
            raise ValueError(f"remat: FX renamed node {name!r} to {node.name!r}")
        env[name] = node

        src_name = nd.get("origin") or (name if match_by_name else None)
        src = joint_nodes.get(src_name) if src_name is not None else None
        if op == "output":
            # A joint graph keeps its output's meta; torch's extraction builds
            # a result graph's output afresh (import_result adds its keys).
            if src is not None and match_by_name and src.op == "output":
                _set_attr(node, "meta", copy.copy(src.meta))
        elif src is not None and op == "placeholder":
            _set_attr(node, "meta", src.meta)  # torch's extraction shares the placeholder's dict
        elif src is not None:
            _set_attr(node, "meta", copy.copy(src.meta))
        elif op == "placeholder" and name in made_by:
            # torch gives a placeholder for a forward node it created that
            # node's meta (meta.update); offloading marks its own on top.
            meta = dict(made_by[name].meta)
            _offload_meta(nd.get("meta") or {}, meta, syms)
            _set_attr(node, "meta", meta)
        else:
            meta = _meta_from_doc(nd, syms, joint_doc=match_by_name, handles=handles)
            _set_attr(node, "meta", meta)
            if meta.get("val") is None and op == "call_function" and nd.get("val", {}).get("kind") == "tensor":
                _propagate_fake_value(node, match_by_name)
        if src is not None and (nd.get("meta") or {}).get("saved_for_offloading"):
            # torch marks the offloaded forward node in its (shared, for a
            # placeholder) meta dict; 2.11 and 2.12 note its device too.
            _offload_meta(nd["meta"], node.meta, syms)
    return graph


def _check_placeholder_targets(graph: fx.Graph, side: str) -> None:
    """FX generates one function parameter per placeholder target, so two
    placeholders sharing a target make a graph no module can be built from.

    torch 2.13 builds such a forward/backward when a graph takes graph-safe
    RNG states of its own and of an invoke_subgraph body: both are numbered
    from fwd_rng_state_0. torch returns the module with stale code (its
    recompile raises SyntaxError); remat says so instead.
    """
    import remat

    seen: dict[str, str] = {}
    for node in graph.find_nodes(op="placeholder"):
        other = seen.setdefault(node.target, node.name)
        if other != node.name:
            raise remat.UnsupportedError(
                f"the {side} graph torch 2.13 builds here has placeholders {other!r} and "
                f"{node.name!r} with the same target {node.target!r} (graph-safe RNG states of "
                "the graph and of an invoke_subgraph body); FX cannot generate code for it, so "
                "remat does not return it (torch returns a module whose code is stale)")


def _propagate_fake_value(node: fx.Node, joint_doc: bool) -> None:
    """meta["val"] (and tensor_meta) of a created node whose document value is
    symbolic: its op run on its inputs' fake values, as torch's rewrites do.
    Left out when an input has no value or the op fails."""
    inputs = node.all_input_nodes
    if not inputs or any(not isinstance(n.meta.get("val"), torch.Tensor) for n in inputs):
        return
    mode = _internals.detect_fake_mode([n.meta["val"] for n in inputs])
    if mode is None:
        return
    args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
    try:
        with mode:
            val = node.target(*args, **kwargs)
    except Exception:
        return
    node.meta["val"] = val
    if "tensor_meta" in node.meta:
        node.meta["tensor_meta"] = _tensor_meta(val, joint_doc)


def _make_module(joint_gm: Optional[fx.GraphModule], graph: fx.Graph,
                 checked: bool = True) -> fx.GraphModule:
    from torch.fx._lazy_graph_module import _make_graph_module

    if checked:
        _checks.check_parameters(graph)
    if joint_gm is None:
        for node in graph.find_nodes(op="get_attr"):
            raise _checks.fail(node.name, "target", f"get_attr target {node.target!r}: no joint "
                                                    "module was given to take it from")
    return _make_graph_module(joint_gm if joint_gm is not None else torch.nn.Module(), graph)


def _refusing_bad_documents(importer: Any) -> Any:
    """Every failure of `importer` on a document is a RematError: an error
    the checks did not name (a malformed meta value, say) becomes an
    InvalidGraphError naming the node being built, with the original as
    its cause."""

    @functools.wraps(importer)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return importer(*args, **kwargs)
        except RematError:
            raise
        except Exception as e:  # noqa: BLE001 -- any other error is the document's
            where = _failed_node(e.__traceback__)
            raise InvalidGraphError(f"{where}: {type(e).__name__}: {_checks._shown(str(e))[1:-1]}") from e

    return wrapper


def _failed_node(tb: Any) -> str:
    """The node _build_graph was building when the error was raised (read
    from its frame, so the loop needs no handler of its own), else the
    document."""
    where = "(document)"
    while tb is not None:
        if tb.tb_frame.f_code is _build_graph.__code__:
            name = tb.tb_frame.f_locals.get("name")
            i = tb.tb_frame.f_locals.get("i")
            if isinstance(name, str) or isinstance(i, int):
                where = f"node {name!r}" if isinstance(name, str) else f"node #{i}"
        tb = tb.tb_next
    return where


def _graph_nodes(doc: Any, field: str) -> list:
    """doc["nodes"] of a graph object, checked to be an array."""
    if type(doc) is not dict or type(doc.get("nodes")) is not list:
        raise InvalidGraphError(f"field {field!r}: expected an object with a \"nodes\" array")
    return doc["nodes"]


def _result_doc(result: Any, joint_gm: fx.GraphModule) -> dict:
    """A partition result, its header and the fields import_result reads checked."""
    r = _load(result)
    _checks.header(r, "remat.partition_result", required=True)
    num_fwd = r.get("num_fwd_outputs")
    if type(num_fwd) is not int or num_fwd < 0:
        raise InvalidGraphError(f"field 'num_fwd_outputs': expected an integer >= 0, got "
                                f"{_checks._shown(num_fwd)}")
    _graph_nodes(r.get("forward"), "forward")
    _graph_nodes(r.get("backward"), "backward")
    saved = r.get("saved_values", [])
    names = {n.name for n in joint_gm.graph.nodes}
    if type(saved) is not list or not all(type(s) is str and s in names for s in saved):
        raise InvalidGraphError("field 'saved_values': expected an array of the joint graph's node names")
    return r


def _call_target(node: str, name: Any, trusted: bool) -> Any:
    """A call_function node's callable; an untrusted file's target outside
    resolve_target's list is an InvalidGraphError naming node and target."""
    if type(name) is not str:
        raise _checks.fail(node, "target", f"expected a string, got {_checks._shown(name)}")
    try:
        return resolve_target(name, trusted)
    except UntrustedTargetError as e:
        raise InvalidGraphError(f"node {node!r}: {e.args[0]}") from None
    except KeyError as e:  # trusted: no importable object has that name
        raise _checks.fail(node, "target", str(e.args[0])) from None


def _attribute_path(node: str, path: Any, root: Any) -> str:
    """A get_attr target: a dotted path of the root module's stored
    attributes, never a dunder (which could reach a class's globals), a
    method or the module's bookkeeping (_doc_checks.attribute_path)."""
    return _checks.attribute_path(node, path, root)


class _Heads:
    """The checks of each node's name, op and shape before its arguments
    are decoded (docs/format.md "Nodes", "Trust"): a unique name FX keeps
    as it is, one of the four ops, args an array and kwargs an object,
    exactly one output node, last; placeholder targets and defaults that
    FX can write as a parameter list."""

    _OPS = frozenset({"placeholder", "call_function", "get_attr", "output"})

    def __init__(self, nodes: Any, joint_gm: Optional[fx.GraphModule]) -> None:
        if type(nodes) is not list:
            raise InvalidGraphError(f"field 'nodes': expected an array, got {type(nodes).__name__}")
        self.count = len(nodes)
        self.root = joint_gm  # None: get_attr paths are checked by _make_module
        self.defaults = False  # a placeholder before has a default value

    def check(self, i: int, nd: Any, env: dict) -> tuple[str, str]:
        if type(nd) is not dict:
            raise InvalidGraphError(f"node #{i}: expected an object, got {type(nd).__name__}")
        name = _checks.name(i, nd.get("name"))
        if name in env:
            raise _checks.fail(name, "name", f"duplicate name (node #{i})")
        op = nd.get("op")
        if op not in self._OPS:
            raise _checks.fail(name, "op", f"unknown node op {_checks._shown(op)} (expected "
                                           "placeholder, call_function, get_attr or output)")
        if (op == "output") != (i == self.count - 1):
            raise _checks.fail(name, "op", "a graph has exactly one output node, its last")
        for field, kind in (("args", list), ("kwargs", dict)):
            if field in nd and type(nd[field]) is not kind:
                raise _checks.fail(name, field, f"expected {'an array' if kind is list else 'an object'}")
        _checks.meta_strings(name, nd)
        return op, name

    def placeholder(self, name: str, target: Any, args: tuple) -> str:
        """A parameter of forward: its target an identifier that shadows no
        other name; its default (args[0]), evaluated when FX builds the
        module, a literal, and a default on each later placeholder too."""
        target = _checks.placeholder_target(name, target)
        if len(args) > 1 or (args and _holds_node(args[0])):
            raise _checks.fail(name, "args", "a placeholder's args are at most one literal, its default")
        if self.defaults and not args:
            raise _checks.fail(name, "args", "a placeholder without a default follows one with a default")
        self.defaults = self.defaults or bool(args)
        return target


def _holds_node(x: Any) -> bool:
    found = []
    fx.node.map_arg(x, found.append)
    return bool(found)


@_refusing_bad_documents
def import_graph(
    doc: Any,
    joint_gm: Optional[fx.GraphModule] = None,
    handles: Optional[list] = None,
    *,
    trusted: bool = False,
) -> fx.GraphModule:
    """Builds an FX GraphModule from a format-v1 graph ({"nodes": [...]}).

    `doc` is a joint-graph document, a result's "forward"/"backward" object, or
    their JSON text. Call targets resolve only to torch's operators and the
    few Python functions FX graphs call (docs/format.md "Trust"); any other
    name is an InvalidGraphError. `trusted=True` resolves any importable name,
    which runs that module's import: only for files you trust.
    """
    d = _load(doc)
    _checks.header(d, "remat.joint_graph", required=False)
    is_joint = d.get("format") == "remat.joint_graph"
    graph = _build_graph(_graph_nodes(d, "nodes"), joint_gm, handles, match_by_name=is_joint,
                         trusted=trusted)
    return _make_module(joint_gm, graph)


def _extend_eager_input_vals(graph: fx.Graph, nodes: list[dict], joint_nodes: dict) -> None:
    """invoke_subgraph calls given extra inputs (the RNG states of their
    bodies, by thread_graphsafe_rng_from_hops) get those inputs' values
    appended to meta["eager_input_vals"], which holds one value per argument,
    as torch appends them."""
    invoke_subgraph = _internals.higher_order_ops().invoke_subgraph

    for node, nd in zip(graph.nodes, nodes):
        if node.op != "call_function" or node.target is not invoke_subgraph:
            continue
        src = joint_nodes.get(nd.get("origin"))
        eager = node.meta.get("eager_input_vals")
        if src is None or not eager or len(node.args) <= len(src.args):
            continue
        args, kwargs = eager
        added = [a.meta.get("val") for a in node.args[len(src.args):]]
        node.meta["eager_input_vals"] = ((*args, *added), kwargs)


def _joint_output_descs(joint_gm: fx.GraphModule) -> list:
    out = next(iter(joint_gm.graph.find_nodes(op="output")))
    outputs = _internals.pytree.arg_tree_leaves(*out.args)
    return _internals.pytree.arg_tree_leaves(out.meta.get("desc", [None] * len(outputs)))


def _set_output_meta(graph: fx.Graph, descs: list, created: set[str]) -> None:
    """The output node's "desc" and (2.12 on) "output_stack_traces", which
    torch's extraction records before its rewrites run: a value a rewrite
    replaced (an offload, its wait) counts as the node it replaced. (The FP8
    quantization's outputs are _quantization.finish's.)"""
    out = next(iter(graph.find_nodes(op="output")))
    out.meta["desc"] = descs
    if not _release.behaves("output_stack_traces_meta"):
        return
    values = out.args[0] if out.args else ()
    out.meta["output_stack_traces"] = [
        _extracted(v, created).meta.get("stack_trace") if isinstance(v, fx.Node) else None
        for v in values
    ]


def _extracted(value: fx.Node, created: set[str]) -> fx.Node:
    """The node extraction returned where a rewrite's node now is: each
    rewrite that replaces an output value takes it as its first input."""
    while value.name in created and value.args and isinstance(value.args[0], fx.Node):
        value = value.args[0]
    return value


def stamp_static_inputs(joint_gm: fx.GraphModule,
                        static_lifetime_input_indices: Optional[list[int]]) -> None:
    """torch 2.15 on: every primal placeholder of the joint graph gets
    meta["is_static_input"], whether it is a static-lifetime input (indices
    count primals in graph order), for the backward compiler's static input
    indices. The forward's and backward's placeholders share those meta
    dicts (import_result), so they carry it too."""
    is_primal = _internals.aot_utils()._is_primal
    static = set(static_lifetime_input_indices or ())
    primals = (n for n in joint_gm.graph.find_nodes(op="placeholder") if is_primal(n))
    for i, node in enumerate(primals):
        node.meta["is_static_input"] = i in static


def stamp_mutation_regions(joint_gm: fx.GraphModule) -> None:
    """meta["mutation_region_id"] on every joint node, as torch's CSE pass
    (fx_graph_cse, run by the min-cut partitioner with config.cse) numbers
    them before merging: the count of mutation ops up to and including the
    node. The result graphs' nodes copy or share these meta dicts, as
    torch's copy them from its CSE'd graph. The joint graph's dead nodes
    (which torch removes first) never mutate, so they shift no count."""
    is_mutation_op = _internals.pattern_matcher().is_mutation_op
    mutates: dict[Any, bool] = {}  # (target, has out=): the verdict depends on nothing else
    region = 0
    for node in joint_gm.graph.nodes:
        if node.op in ("call_function", "call_method"):
            key = (node.op, node.target, node.kwargs.get("out") is not None)
            try:
                hit = mutates.get(key)
            except TypeError:  # an unhashable target
                key, hit = None, None
            if hit is None:
                hit = is_mutation_op(node)
                if key is not None:
                    mutates[key] = hit
            region += hit
        node.meta["mutation_region_id"] = region


def _rng_wrapped_ops(fw_graph: fx.Graph, created: set[str], joint_gm: fx.GraphModule) -> bool:
    """Gives each value getitem of a CPU-style RNG wrapper the meta of the
    random op it stands for, as torch's functionalize_rng_ops copies it
    (stack trace, module stack, seq_nr, the op's own tuple value...).
    Returns whether there was one: torch then rebuilds the forward's output
    node (a fresh one, with no meta) to return the RNG states.

    The result names no joint node for the wrappers; the op is the joint
    node the forward no longer has whose target, args and kwargs the
    wrapper repeats (else, an argument merged by CSE, the first such node of
    its target), taken in joint-graph order (the rewrite's own order)."""
    higher_order = torch.ops.higher_order
    run_and_save = getattr(higher_order, "run_and_save_rng_state", None)
    graphsafe = getattr(higher_order, "graphsafe_run_with_rng_state", None)
    wrappers = [n for n in fw_graph.nodes if n.op == "call_function" and n.name in created
                and n.target in (run_and_save, graphsafe)]
    if not wrappers:
        return False
    in_forward = {n.name for n in fw_graph.nodes}
    ops = {w.args[0] for w in wrappers}
    candidates = [n for n in joint_gm.graph.nodes
                  if n.op == "call_function" and n.target in ops and n.name not in in_forward]
    by_name = fx.node.map_arg
    rebuilt = False
    for w in wrappers:
        kwargs = {k: v for k, v in w.kwargs.items() if not (w.target is graphsafe and k == "rng_state")}
        key = by_name((w.args[1:], kwargs), lambda n: n.name)
        same_op = [c for c in candidates if c.target is w.args[0]]
        # CSE may have merged an argument away: then the first of its kind.
        op = next((c for c in same_op if by_name((c.args, dict(c.kwargs)), lambda n: n.name) == key),
                  same_op[0] if same_op else None)
        if op is not None:
            candidates.remove(op)
        if w.target is not run_and_save:
            continue
        rebuilt = True
        value = next((u for u in w.users if u.args[1:] == (1,)), None)
        if op is not None and value is not None:
            _set_attr(value, "meta", copy.copy(op.meta))
    return rebuilt


def _created_names(doc_nodes: list) -> set[str]:
    return {nd["name"] for nd in doc_nodes if "origin" not in nd}


def created_nodes(doc_nodes: list, graph: fx.Graph) -> dict[str, fx.Node]:
    """The nodes of `graph` (built from `doc_nodes`) that a rewrite created, by name."""
    names = {nd["name"] for nd in doc_nodes if "origin" not in nd and nd["op"] != "output"}
    return {n.name: n for n in graph.nodes if n.name in names}


@_refusing_bad_documents
def import_result(
    result: Any,
    joint_gm: fx.GraphModule,
    handles: Optional[list] = None,
    *,
    trusted: bool = False,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """The (forward, backward) GraphModules of a format-v1 partition result.
    Targets resolve as in import_graph (`trusted` likewise)."""
    return _import_result(_result_doc(result, joint_gm), joint_gm, handles, trusted, checked=True)


def import_own_result(result: dict, joint_gm: fx.GraphModule,
                      handles: list) -> tuple[fx.GraphModule, fx.GraphModule]:
    """import_result for the drop-in's own round trip, without the document
    checks: `result` is what remat.partition returned, in this process, for
    export_joint_graph's document of the live `joint_gm`, which no file or
    caller came between. Its names, targets, kwargs keys, get_attr paths,
    meta strings and symbolic arithmetic are the live graph's own (or the
    engine's rewrites' names made from them), which torch's partitioner
    would write into the same generated code; the checks guard what a
    document from outside could hold (docs/format.md "Trust"), and on a
    graph of a few nodes they were the drop-in's largest fixed cost
    (bench/bench_small_dynamic.py). Targets still resolve untrusted."""
    return _import_result(result, joint_gm, handles, False, checked=False)


def _import_result(r: dict, joint_gm: fx.GraphModule, handles: Optional[list], trusted: bool,
                   checked: bool) -> tuple[fx.GraphModule, fx.GraphModule]:
    SavedForBackwardsAOTOutput = _internals.descriptors().SavedForBackwardsAOTOutput
    SavedForBackwardsNoVcCheckAOTOutput = _internals.descriptors().SavedForBackwardsNoVcCheckAOTOutput
    FakeScriptObject = _internals.FakeScriptObject

    num_fwd = r["num_fwd_outputs"]
    joint_nodes = {n.name: n for n in joint_gm.graph.nodes}
    fw_graph = _build_graph(r["forward"]["nodes"], joint_gm, handles, match_by_name=False,
                            trusted=trusted, checked=checked, joint_nodes=joint_nodes)
    bw_graph = _build_graph(r["backward"]["nodes"], joint_gm, handles, match_by_name=False,
                            made_by=created_nodes(r["forward"]["nodes"], fw_graph), trusted=trusted,
                            checked=checked, joint_nodes=joint_nodes)

    _check_placeholder_targets(fw_graph, "forward")
    _check_placeholder_targets(bw_graph, "backward")
    # Names of the nodes the rewrites created (no joint node to copy).
    fw_created, bw_created = (_created_names(r[side]["nodes"]) for side in ("forward", "backward"))
    output_rebuilt = _rng_wrapped_ops(fw_graph, fw_created, joint_gm)
    _extend_eager_input_vals(fw_graph, r["forward"]["nodes"], joint_nodes)
    _extend_eager_input_vals(bw_graph, r["backward"]["nodes"], joint_nodes)
    descs = _joint_output_descs(joint_gm)
    # Saved tensors (script objects are saved after them), the last of which
    # skip version-counter checks.
    saved = [joint_nodes[s] for s in r.get("saved_values", [])]
    saved = [n for n in saved if not isinstance(n.meta.get("val"), FakeScriptObject)]
    no_vc_start = sum(1 for n in saved if not n.meta.get("saved_tensor_with_no_vc_check", False))
    fw_out = next(iter(fw_graph.find_nodes(op="output")))
    num_saved = len(_internals.pytree.arg_tree_leaves(*fw_out.args)) - num_fwd
    if not output_rebuilt:
        _set_output_meta(
            fw_graph,
            descs[:num_fwd]
            + [
                SavedForBackwardsNoVcCheckAOTOutput(i)
                if no_vc_start <= i < len(saved)
                else SavedForBackwardsAOTOutput(i)
                for i in range(num_saved)
            ],
            fw_created,
        )
    _set_output_meta(bw_graph, descs[num_fwd:], bw_created)
    if _release.behaves("mark_autograd_backward_meta"):
        _mark_autograd_backward(bw_graph, bw_created)
    return _make_module(joint_gm, fw_graph, checked), _make_module(joint_gm, bw_graph, checked)


def _mark_autograd_backward(bw_graph: fx.Graph, created: set[str]) -> None:
    """torch 2.13 on marks every backward node it extracts from the joint
    graph (recomputed forward nodes too); nodes its later rewrites create
    (no origin) stay unmarked. Before 2.13 a backward node keeps what its
    joint node carried (the tracer's mark, 2.12 on)."""
    for node in bw_graph.nodes:
        if node.op in ("call_function", "get_attr") and node.name not in created:
            node.meta["autograd_backward"] = True


__all__ = ["import_graph", "import_result", "stamp_mutation_regions", "stamp_static_inputs", "OpaqueArg"]
