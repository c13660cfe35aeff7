"""Contract: loading a graph file never runs code it names (docs/format.md
"Trust"). Untrusted (the default), import_graph / import_result resolve call
targets only to torch's operators and the symbolic-shape functions; anything
else is an InvalidGraphError naming the node and the target, raised before any
module it names is imported. trusted=True resolves any importable name, and
what it resolved is not remembered for later untrusted loads.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("remat.torch")
import remat  # noqa: E402
from corpus import shipped_documents  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")


def _example() -> dict:
    with open(os.path.join(ROOT, "examples", "mlp.json")) as f:
        return json.load(f)


def _with_target(doc: dict, target: str, args=None) -> tuple[dict, str]:
    """`doc` with its first call_function node calling `target`."""
    doc = copy.deepcopy(doc)
    node = next(n for n in doc["nodes"] if n["op"] == "call_function")
    node["target"] = target
    if args is not None:
        node["args"] = args
    return doc, node["name"]


def test_untrusted_file_cannot_name_os_system(tmp_path):
    marker = tmp_path / "ran"
    doc, name = _with_target(_example(), "os.system", [f"touch {marker}"])
    with pytest.raises(remat.InvalidGraphError) as e:
        rt.import_graph(doc)
    assert name in str(e.value) and "'os.system'" in str(e.value) and "trusted=True" in str(e.value)
    assert not marker.exists()


def test_refused_before_the_named_module_is_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "remat_trust_probe.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef f(*a):\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    doc, _ = _with_target(_example(), "remat_trust_probe.f")
    with pytest.raises(remat.InvalidGraphError, match="remat_trust_probe.f"):
        rt.import_graph(doc)
    assert not marker.exists() and "remat_trust_probe" not in sys.modules


@pytest.mark.parametrize("target", ["operator.attrgetter", "operator.methodcaller", "operator.call",
                                    "operator.setitem", "builtins.eval", "builtins.getattr",
                                    "torch.load", "torch.fx.graph_module.GraphModule",
                                    "higher_order.__class__", "aten.__dict__"])
def test_only_operators_and_symbolic_functions_resolve_untrusted(target):
    doc, _ = _with_target(_example(), target)
    with pytest.raises(remat.InvalidGraphError, match="is not an operator registered"):
        rt.import_graph(doc)


@pytest.mark.parametrize("target", ["aten.mm.default", "aten.rand", "prims.convert_element_type.default",
                                    "higher_order.with_effects", "operator.getitem", "operator.add",
                                    "operator.floordiv", "torch.sym_float", "torch.sym_max",
                                    "math.floor", "builtins.round"])
def test_what_the_exporter_writes_resolves_untrusted(target):
    rt._targets._SEEN.pop(target, None)  # a fresh lookup, not this process's exports
    assert callable(rt.resolve_target(target))


def test_trusted_resolves_any_name_and_is_not_remembered():
    doc, _ = _with_target(_example(), "os.system", [])
    gm = rt.import_graph(doc, trusted=True)
    assert any(n.target is os.system for n in gm.graph.nodes)
    with pytest.raises(remat.InvalidGraphError, match="os.system"):
        rt.import_graph(doc)


def test_every_shipped_graph_imports_untrusted():
    """The allowlist covers what the exporter writes for every example and
    test graph in the repository (torch's own graphs, captured)."""
    checked = 0
    for _, doc in shipped_documents():
        if not isinstance(doc, dict) or doc.get("format") != "remat.joint_graph":
            continue
        targets = {n["target"] for n in doc.get("nodes", []) if n.get("op") == "call_function"}
        for t in targets:
            rt._targets._SEEN.pop(t, None)
            try:
                rt.resolve_target(t)
            except rt._targets.UntrustedTargetError:
                # an op this torch does not register (a newer release's) is
                # refused like any unknown name: not resolvable trusted either
                with pytest.raises(KeyError):
                    rt.resolve_target(t, trusted=True)
        checked += 1
    assert checked > 10


@pytest.mark.parametrize("field,value", [("dtype", "load"), ("layout", "float32"),
                                         ("memory_format", "__builtins__")])
def test_constants_name_only_torch_constants_of_their_kind(field, value):
    doc = copy.deepcopy(_example())
    node = next(n for n in doc["nodes"] if n["op"] == "call_function")
    node["kwargs"] = {field: {field: value}}
    with pytest.raises(remat.InvalidGraphError, match=f"field 'kwargs': {field} '{value}' is not a torch"):
        rt.import_graph(doc)


def test_get_attr_targets_are_attribute_paths():
    doc = copy.deepcopy(_example())
    at = len([n for n in doc["nodes"] if n["op"] == "placeholder"])
    doc["nodes"].insert(at, {"name": "g", "op": "get_attr", "target": "__class__.__init__.__globals__"})
    with pytest.raises(remat.InvalidGraphError, match="get_attr target"):
        rt.import_graph(doc)
