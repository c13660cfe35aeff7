"""FX -> format v1 -> (C++ read+write) -> format v1 -> FX loses nothing the
partitioner reads.

Checked node by node on joint graphs captured live from torch (the example
models, a dynamic-shapes one among them) and on synthetic graphs that carry
every argument kind: names, ops, targets, args and kwargs with their Python
types, and every meta field of the format, each compared against what torch's
own helpers say about the original FX node.
"""

from __future__ import annotations

import copy
import glob
import math
import os

import pytest

torch = pytest.importorskip("torch")
orjson = pytest.importorskip("orjson")

import torch.fx as fx  # noqa: E402
from torch._library.fake_class_registry import FakeScriptObject  # noqa: E402
from torch.fx.experimental.symbolic_shapes import (  # noqa: E402
    free_symbols,
    is_symbol_binding_fx_node,
)

# The size hint the running release's partitioner reads (remat's shim:
# optimization_hint from 2.12 on, size_hint in 2.11).
from remat.torch._internals import optimization_hint  # noqa: E402
from torch.fx.immutable_collections import immutable_dict, immutable_list  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _release  # noqa: E402

EXAMPLE_NAMES = ["mlp", "transformer_block", "cnn_batchnorm", "checkpointed", "mlp_dynamic"]


# --- comparing FX graphs ---------------------------------------------------


def _plain(x):
    """FX containers as their plain types, nodes as their names: a structure
    whose == also compares element types (1 vs 1.0, tuple vs list)."""
    if isinstance(x, fx.Node):
        return ("node", x.name)
    if isinstance(x, (immutable_list, list)):
        return ("list", [_plain(v) for v in x])
    if isinstance(x, tuple):
        return ("tuple", [_plain(v) for v in x])
    if isinstance(x, (immutable_dict, dict)):
        return ("dict", {k: _plain(v) for k, v in x.items()})
    if isinstance(x, slice):
        return ("slice", [_plain(x.start), _plain(x.stop), _plain(x.step)])
    if isinstance(x, float) and math.isnan(x):
        return ("float", "nan")
    return (type(x).__name__, x)


def assert_same_graph(a: fx.Graph, b: fx.Graph) -> None:
    na, nb = list(a.nodes), list(b.nodes)
    assert [n.name for n in na] == [n.name for n in nb]
    for x, y in zip(na, nb):
        assert x.op == y.op, x.name
        if x.op == "call_function":
            assert x.target is y.target, x.name
        else:
            assert x.target == y.target, x.name
        assert _plain(x.args) == _plain(y.args), x.name
        assert _plain(x.kwargs) == _plain(y.kwargs), x.name


# --- what the format must say, from torch's own helpers --------------------


def check_export_against_fx(gm: fx.GraphModule, doc: dict) -> None:
    nodes = list(gm.graph.nodes)
    assert [n["name"] for n in doc["nodes"]] == [n.name for n in nodes]
    ops = {o["name"]: o for o in doc["ops"]}
    storage_of: dict = {}
    for n, d in zip(nodes, doc["nodes"]):
        assert d["op"] == n.op
        if n.op == "call_function":
            assert rt.resolve_target(d["target"]) is n.target
            op = ops[d["target"]]
            if isinstance(n.target, torch._ops.OpOverload):
                schema = n.target._schema
                assert op["mutable"] == schema.is_mutable
                assert op["view"] == n.target.is_view
                assert op["returns"] == len(schema.returns)
                assert ("pointwise" in op["tags"]) == (torch.Tag.pointwise in n.target.tags)
                assert ("nondeterministic_seeded" in op["tags"]) == (
                    torch.Tag.nondeterministic_seeded in n.target.tags)
                packet = n.target.overloadpacket
                any_pw = any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
                assert ("pointwise" in op["packet_tags"]) == any_pw
        assert d.get("impure", False) == n.is_impure(impure_random=False)
        assert d.get("tensor_meta", False) == ("tensor_meta" in n.meta)
        # The running release's is_symbol_binding_fx_node: by the replaced
        # expression to 2.13, by the raw one from 2.14 (bind_unreplaced_symbols).
        bound = is_symbol_binding_fx_node(n)
        ours = d.get("binds_symbol")
        if _release.behaves("bind_unreplaced_symbols") and "binds_symbol_unreplaced" in d:
            ours = d["binds_symbol_unreplaced"]
        assert ours == (str(bound) if bound is not None else None)
        meta = d.get("meta", {})
        policy = n.meta.get("recompute")
        assert meta.get("recompute") == (policy.name if policy is not None else None)
        assert meta.get("ac_graph_id") == n.meta.get("ac_graph_id")
        assert meta.get("partitioner_tag") == n.meta.get("partitioner_tag")
        assert meta.get("has_backward_hook", False) == n.meta.get("has_backward_hook", False)
        assert meta.get("saved_tensor_with_no_vc_check", False) == n.meta.get(
            "saved_tensor_with_no_vc_check", False)
        if "val" not in n.meta:
            assert "val" not in d
            continue
        val, v = n.meta["val"], d["val"]
        if isinstance(val, (torch.Tensor, torch.SymInt, list, tuple)):
            assert d.get("free_symbols", []) == sorted(s.name for s in free_symbols(val))
            raw = getattr(torch._functorch.partitioners, "_free_symbols_without_replacements", None)
            if raw is not None:  # 2.14 on: what the backward binds
                ours = set(d.get("free_symbols", [])) | set(d.get("free_symbols_unreplaced", []))
                assert ours == {s.name for s in raw(val) | free_symbols(val)}
        if isinstance(val, torch.Tensor):
            assert v["kind"] == "tensor"
            assert v["dtype"] == str(val.dtype).removeprefix("torch.")
            assert v["device"] == str(val.device)
            assert v["numel_hint"] == optimization_hint(val.numel(), fallback=4096)
            hints = [d_ if isinstance(d_, int) else d_["hint"] for d_ in v["shape"]]
            assert hints == [optimization_hint(s) for s in val.shape]
            strides = [d_ if isinstance(d_, int) else d_["hint"] for d_ in v["stride"]]
            assert strides == [optimization_hint(s) for s in val.stride()]
            if torch._C._has_storage(val):
                ref = StorageWeakRef(val.untyped_storage())
                # Equal ids exactly when torch sees the same storage.
                assert storage_of.setdefault(v["storage"], ref) == ref
            else:
                assert v.get("storage", -1) == -1
        elif isinstance(val, torch.SymInt):
            hint = optimization_hint(val)
            if isinstance(hint, torch.SymInt):  # a jagged tensor's ragged size: a nested int
                hint = {"nested_int": str(hint)}
            assert v == {"kind": "symint", "expr": str(val.node.expr), "hint": hint}
        elif isinstance(val, (list, tuple)):
            assert v["kind"] == "sequence" and len(v["items"]) == len(val)
        elif isinstance(val, FakeScriptObject):
            assert v["kind"] == "script_object"
        elif val is None:
            assert v == {"kind": "none"}


# --- normalizing documents: spelled-out defaults equal omitted ones -----------


def _norm_dim(d):
    return d if isinstance(d, int) else {"expr": d["expr"], "hint": d.get("hint")}


def _norm_value(v):
    v = dict(v)
    if v["kind"] == "tensor":
        v["shape"] = [_norm_dim(x) for x in v["shape"]]
        if "stride" in v:
            v["stride"] = [_norm_dim(x) for x in v["stride"]]
        v.setdefault("storage", -1)
        if "numel_hint" not in v:  # the format's default
            hints = [d if isinstance(d, int) else d["hint"] for d in v["shape"]]
            v["numel_hint"] = 4096 if None in hints else math.prod(hints)
        v.pop("itemsize", None)
    elif v["kind"] in ("symint", "symfloat", "symbool"):
        v.setdefault("hint", None)
    elif v["kind"] == "sequence":
        v["items"] = [_norm_value(x) for x in v["items"]]
    elif v["kind"] == "dict":
        v["items"] = {k: _norm_value(x) for k, x in v["items"].items()}
    return v


def _norm_arg(a):
    if isinstance(a, list):
        return [_norm_arg(x) for x in a]
    if isinstance(a, dict):
        if "opaque" in a:
            return {"opaque": a["opaque"], "handle": a.get("handle", -1)}
        return {k: _norm_arg(v) for k, v in a.items()}
    return a


def normalize(doc: dict, only_ops: set | None = None) -> dict:
    """`only_ops`: compare only these ops (those the source document listed)."""
    nodes = []
    for n in doc["nodes"]:
        m = {
            "name": n["name"], "op": n["op"], "target": n["target"],
            "args": _norm_arg(n.get("args", [])), "kwargs": _norm_arg(n.get("kwargs", {})),
            "tensor_meta": n.get("tensor_meta", False), "impure": n.get("impure", False),
            "free_symbols": n.get("free_symbols", []), "binds_symbol": n.get("binds_symbol"),
            "meta": n.get("meta", {}),
        }
        if "val" in n:
            m["val"] = _norm_value(n["val"])
        nodes.append(m)
    used = {n["target"] for n in doc["nodes"] if n["op"] == "call_function"}
    if only_ops is not None:
        used &= only_ops
    ops = {}
    for o in doc.get("ops", []):
        o = dict(o)
        o.pop("categories", None)
        for k in ("tags", "packet_tags", "mutable_args"):
            o[k] = sorted(o.get(k, []))
        ops[o["name"]] = o
    return {
        "format": doc["format"], "version": doc["version"],
        "num_fwd_outputs": doc["num_fwd_outputs"],
        "static_lifetime_input_indices": doc.get("static_lifetime_input_indices", []),
        "ops": {k: ops[k] for k in sorted(used)},
        "nodes": nodes,
    }


# --- tests -------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_export_records_what_the_partitioner_reads(captured, name):
    c = captured[name]
    doc = c.export()
    assert doc["format"] == "remat.joint_graph" and doc["version"] == 1
    assert doc["num_fwd_outputs"] == c.num_fwd_outputs
    check_export_against_fx(c.joint_module, doc)


DYNAMIC_CORPUS = ["dynamic_mlp", "dynamic_layernorm", "dynamic_attention_mark",
                  "dynamic_checkpoint_dropout", "dynamic_size_output", "nested_jagged_mlp"]


@pytest.mark.parametrize("case", DYNAMIC_CORPUS)
def test_export_of_symbolic_graphs_records_what_torch_sees(case):
    """Shapes, hints and free symbols of dynamic graphs, printed once per
    distinct expression by the exporter, equal what torch reports per node."""
    from corpus import captured_graphs

    for cap in captured_graphs(case):
        gm = cap.fresh_joint()
        check_export_against_fx(gm, rt.export_joint_graph(gm, cap.num_fwd_outputs))


def test_dynamic_example_is_symbolic(captured):
    doc = captured["mlp_dynamic"].export()
    assert any(n.get("binds_symbol") for n in doc["nodes"])
    assert any(
        isinstance(d, dict)
        for n in doc["nodes"] if n.get("val", {}).get("kind") == "tensor"
        for d in n["val"]["shape"]
    )


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_python_roundtrip(captured, name):
    c = captured[name]
    handles: list = []
    doc = c.export(as_json=True, handles=handles)
    # Without the joint graph: structure from the document alone.
    assert_same_graph(c.joint_module.graph, rt.import_graph(doc, handles=handles).graph)
    # With it: meta comes back from the joint nodes, so the export is identical.
    gm = rt.import_graph(doc, c.joint_module, handles)
    assert_same_graph(c.joint_module.graph, gm.graph)
    again = rt.export_joint_graph(gm, c.num_fwd_outputs, c.static_lifetime_input_indices, handles=[])
    assert again == orjson.loads(doc)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_cpp_roundtrip(ext, captured, name):
    c = captured[name]
    handles: list = []
    doc = c.export(handles=handles)
    out = ext.roundtrip(orjson.dumps(doc))
    back = orjson.loads(out)
    assert normalize(back) == normalize(doc)
    gm = rt.import_graph(back, handles=handles)
    assert_same_graph(c.joint_module.graph, gm.graph)
    gm = rt.import_graph(back, c.joint_module, handles)
    check_export_against_fx(gm, rt.export_joint_graph(gm, c.num_fwd_outputs))
    # Deterministic: the same input gives the same bytes.
    assert ext.roundtrip(orjson.dumps(doc)) == out


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(
    os.path.dirname(__file__), "..", "..", "examples", "*.json"))), ids=os.path.basename)
def test_cpp_roundtrip_stored_examples(ext, path):
    with open(path, "rb") as f:
        doc = orjson.loads(f.read())
    if doc.get("format") != "remat.joint_graph":
        pytest.skip("not a joint graph")
    back = orjson.loads(ext.roundtrip(orjson.dumps(doc)))
    listed = {o["name"] for o in doc.get("ops", [])}
    assert normalize(back, listed) == normalize(doc, listed)
    # Idempotent after one pass.
    assert ext.roundtrip(orjson.dumps(back)) == ext.roundtrip(orjson.dumps(doc))


def test_info_counts(ext, captured):
    c = captured["mlp"]
    info = remat.info(c.export(as_json=True))
    nodes = list(c.joint_module.graph.nodes)
    assert info["nodes"] == len(nodes)
    assert info["placeholder"] == sum(n.op == "placeholder" for n in nodes)
    assert info["call_function"] == sum(n.op == "call_function" for n in nodes)
    assert info["output"] == 1
    assert info["num_fwd_outputs"] == c.num_fwd_outputs


# --- every argument kind, on a synthetic graph -----------------------------------


class _Token:
    """An object the format can only carry as an opaque handle."""

    def __repr__(self) -> str:  # valid Python, for FX code generation
        return "_Token()"


def _synthetic_graph():
    import operator

    g = fx.Graph()

    def cf(name, target, args, kwargs=None):
        return g.create_node("call_function", target, args, kwargs or {}, name=name)

    x = g.placeholder("primals_1")
    full = cf("full", torch.ops.aten.full.default, ([2, 3], 1.0), {
        "dtype": torch.float16, "layout": torch.strided, "device": torch.device("cpu"),
        "pin_memory": False})
    c = cf("clone", torch.ops.aten.clone.default, (x,), {"memory_format": torch.contiguous_format})
    cl = cf("clamp", torch.ops.aten.clamp.default, (c, float("-inf"), float("inf")))
    nan = cf("add_nan", torch.ops.aten.add.Scalar, (cl, float("nan")))
    sl = cf("slice", torch.ops.aten.slice.Tensor, (nan, 0, 1, 9223372036854775807))
    gi = cf("getitem", operator.getitem, (sl, slice(None, 2, None)))
    tok = _Token()
    odd = cf("add", torch.ops.aten.add.Tensor, (gi, full), {"alpha": 1})
    weird = cf("add_1", operator.add, (odd, (1, 2.5, "s", None, True, [3, (4,)])))
    blob = cf("is_", operator.is_, (weird, tok))
    d = cf("getitem_1", operator.getitem, ({"a": x, "b": [1.0, 2]}, "a"))
    g.output((odd, blob, d, None))
    return fx.GraphModule(torch.nn.Module(), g), tok


def test_all_argument_kinds_roundtrip(ext):
    gm, tok = _synthetic_graph()
    handles: list = []
    doc = rt.export_joint_graph(gm, 1, handles=handles)
    enc = {n["name"]: n for n in doc["nodes"]}
    assert enc["full"]["kwargs"]["dtype"] == {"dtype": "float16"}
    assert enc["full"]["kwargs"]["layout"] == {"layout": "strided"}
    assert enc["full"]["kwargs"]["device"] == {"device": "cpu"}
    assert enc["clone"]["kwargs"]["memory_format"] == {"memory_format": "contiguous_format"}
    assert enc["clamp"]["args"][1:] == [{"float": "-inf"}, {"float": "inf"}]
    assert enc["getitem"]["args"][1] == {"slice": [None, 2, None]}
    assert enc["is_"]["args"][1]["handle"] == 0 and handles[0] is tok
    for doc_in in (doc, orjson.loads(ext.roundtrip(orjson.dumps(doc)))):
        assert normalize(doc_in) == normalize(doc)
        back = rt.import_graph(doc_in, handles=handles)
        assert_same_graph(gm.graph, back.graph)
        blob = next(n for n in back.graph.nodes if n.name == "is_")
        assert blob.args[1] is tok


def test_opaque_without_handles_keeps_repr():
    gm, tok = _synthetic_graph()
    doc = rt.export_joint_graph(gm, 1)
    blob = next(n for n in doc["nodes"] if n["name"] == "is_")
    assert blob["args"][1] == {"opaque": repr(tok), "handle": -1}
    back = rt.import_graph(doc)
    arg = next(n for n in back.graph.nodes if n.name == "is_").args[1]
    assert arg.text == repr(tok)


def test_export_as_json_is_deterministic(captured):
    c = captured["transformer_block"]
    assert c.export(as_json=True) == c.export(as_json=True)
    assert orjson.loads(c.export(as_json=True)) == c.export()


def test_target_names():
    import operator

    assert rt.target_name(torch.ops.aten.mm.default) == "aten.mm.default"
    assert rt.target_name(torch.ops.aten.add.Tensor) == "aten.add.Tensor"
    assert rt.target_name(operator.getitem) == "operator.getitem"
    assert rt.target_name(torch.sym_sum) == "torch.sym_sum"
    assert rt.target_name(torch.ops.higher_order.auto_functionalized) == "higher_order.auto_functionalized"
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state

    for t in (run_and_save_rng_state, run_with_rng_state, torch.ops.aten.mm.default,
              operator.getitem, torch.sym_sum, torch.ops.prims.convert_element_type.default,
              torch.ops.higher_order.with_effects):
        # Fresh lookups, not the in-process cache.
        name = rt.target_name(t)
        rt._targets._SEEN.pop(name, None)
        assert rt.resolve_target(name) is t


def test_import_result_builds_modules_like_torch(captured):
    """A hand-made result document (what the engine returns) for mlp: the
    modules carry torch's output descs and backward markers."""
    from torch._functorch._aot_autograd.descriptors import SavedForBackwardsAOTOutput
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    c = captured["mlp"]
    joint = copy.deepcopy(c.joint_module)
    fw_ref, bw_ref = min_cut_rematerialization_partition(
        copy.deepcopy(c.joint_module), c.joint_inputs, num_fwd_outputs=c.num_fwd_outputs)
    handles: list = []
    fw_nodes, _ = rt.export_graph_nodes(fw_ref.graph, handles=handles)
    bw_nodes, _ = rt.export_graph_nodes(bw_ref.graph, handles=handles)
    for n in fw_nodes + bw_nodes:
        if n["op"] != "output":
            n["origin"] = n["name"]
    saved = [n.name for n in bw_ref.graph.find_nodes(op="placeholder") if not n.name.startswith("tangents")]
    result = {"format": "remat.partition_result", "version": 1, "num_fwd_outputs": c.num_fwd_outputs,
              "saved_values": saved, "forward": {"nodes": fw_nodes}, "backward": {"nodes": bw_nodes}}
    fw, bw = rt.import_result(result, joint, handles)
    assert_same_graph(fw_ref.graph, fw.graph)
    assert_same_graph(bw_ref.graph, bw.graph)
    out_ref = next(iter(fw_ref.graph.find_nodes(op="output")))
    out = next(iter(fw.graph.find_nodes(op="output")))
    assert out.meta["desc"] == out_ref.meta["desc"]
    assert isinstance(out.meta["desc"][-1], SavedForBackwardsAOTOutput)
    bout = next(iter(bw.graph.find_nodes(op="output")))
    assert bout.meta["desc"] == next(iter(bw_ref.graph.find_nodes(op="output"))).meta["desc"]
    joint_nodes = {n.name: n for n in joint.graph.nodes}
    for n in fw.graph.nodes:
        if n.op == "placeholder":
            assert n.meta is joint_nodes[n.name].meta
        elif n.op == "call_function":
            assert n.meta is not joint_nodes[n.name].meta
            assert n.meta["val"] is joint_nodes[n.name].meta["val"]
    # 2.13 on marks every backward node autograd_backward; earlier releases
    # do not (mark_autograd_backward_meta): the import follows torch's own.
    bw_ref_nodes = {n.name: n for n in bw_ref.graph.nodes}
    for n in bw.graph.nodes:
        if n.op == "call_function":
            assert n.meta.get("autograd_backward") == bw_ref_nodes[n.name].meta.get("autograd_backward"), n.name
    from torch.fx._lazy_graph_module import _LazyGraphModule

    assert isinstance(fw, _LazyGraphModule) == isinstance(fw_ref, _LazyGraphModule)
    # The imported modules run.
    fw.recompile()


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_engine_result_imports_as_torch_builds_it(ext, captured, name):
    """export -> engine partition -> import_result gives the modules torch's
    own partitioner builds from the same joint graph (code and output descs)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    c = captured[name]
    handles: list = []
    result = remat.partition(c.export(as_json=True, handles=handles), {}, "min_cut", as_json=False)
    fw, bw = rt.import_result(result, c.joint_module, handles)
    fw_ref, bw_ref = min_cut_rematerialization_partition(
        copy.deepcopy(c.joint_module), c.joint_inputs, num_fwd_outputs=c.num_fwd_outputs,
        static_lifetime_input_indices=c.static_lifetime_input_indices)
    assert fw.code == fw_ref.code
    assert bw.code == bw_ref.code
    for mine, ref in ((fw, fw_ref), (bw, bw_ref)):
        out, out_ref = (next(iter(m.graph.find_nodes(op="output"))) for m in (mine, ref))
        assert out.meta["desc"] == out_ref.meta["desc"]


def test_binding_errors_are_remat_errors(ext, captured):
    doc = captured["mlp"].export(as_json=True)
    with pytest.raises(remat.ParseError):
        remat.info(b"{not json")
    with pytest.raises(remat.InvalidOptionError, match="bogus"):
        remat.partition(doc, {"bogus": 1})
    with pytest.raises(remat.InvalidOptionError, match="cse"):
        remat.partition(doc, {"cse": 3})
    with pytest.raises(remat.InvalidOptionError):
        remat.partition(doc, {"activation_memory_budget": 2.0})
    with pytest.raises(remat.InvalidOptionError, match="partitioner"):
        remat.partition(doc, {}, "nope")
    with pytest.raises(remat.InvalidOptionError, match="category"):
        remat.partition(doc, {"ops": {"aten.mm": ["bogus"]}})
    assert issubclass(remat.NoFiniteCutError, remat.RematError)


def test_import_remat_does_not_import_torch():
    import subprocess
    import sys

    code = "import remat, sys; assert 'torch' not in sys.modules, 'torch imported'"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(remat.__file__))] + sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
