"""Region memory budgets inside higher-order-op bodies, as torch reads them.

torch's min-cut partitioner resolves ``region_activation_memory_budget``
annotations over the joint graph *and* every graph module nested in the joint
module (``invoke_subgraph`` bodies and the like): annotated nodes anywhere
must agree, and every call_function of a body must be annotated once any
budget exists. Each case takes a captured joint graph, annotates it, nests
bodies in it, and requires remat to do what torch does, live: the same
partition where torch partitions, an error with torch's message where torch
raises.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx as fx
from torch._functorch.partitioners import min_cut_rematerialization_partition

import parity
import remat
from corpus import captured_graphs
from corpus.capture import replay_context

remat_torch = pytest.importorskip("remat.torch")

KEY = "_region_activation_memory_budget"


def _annotate(graph: fx.Graph, budget: float | None) -> None:
    for n in graph.nodes:
        if budget is not None:
            n.meta.setdefault("custom", {})[KEY] = budget


def _body(budget: float | None, unannotated: int = 0) -> fx.GraphModule:
    """x -> sin -> cos -> (cos,), a HOP body; its last `unannotated` ops lack the budget."""
    g = fx.Graph()
    x = g.placeholder("arg0_1")
    ops = [g.call_function(torch.ops.aten.sin.default, (x,))]
    ops.append(g.call_function(torch.ops.aten.cos.default, (ops[-1],)))
    g.output((ops[-1],))
    for n in g.nodes:
        n.meta["custom"] = {KEY: budget} if budget is not None else {}
    for n in ops[len(ops) - unannotated:]:
        n.meta["custom"] = {}
    return fx.GraphModule(torch.nn.Module(), g)


# case -> (top-level budget, [(module path, body budget, unannotated ops)])
CASES = {
    "body_agrees": (0.3, [("repeated_subgraph0", 0.3, 0)]),
    "body_conflicts": (0.3, [("repeated_subgraph0", 0.8, 0)]),
    "distinct_per_subgraph": (0.3, [("repeated_subgraph0", 0.3, 0), ("repeated_subgraph1", 0.8, 0)]),
    "partial_body": (0.5, [("repeated_subgraph0", 0.5, 1)]),
    "unannotated_body": (0.5, [("repeated_subgraph0", None, 0)]),
    "only_body_annotated": (None, [("repeated_subgraph0", 0.5, 0)]),
    "nested_two_deep": (0.4, [("outer", 0.4, 0), ("outer.inner", 0.4, 1)]),
    "no_budget_anywhere": (None, [("repeated_subgraph0", None, 0)]),
    "body_out_of_range": (1.5, [("repeated_subgraph0", 1.5, 0)]),
}


def _joint(spec: tuple, cap) -> fx.GraphModule:
    top, bodies = spec
    joint = cap.fresh_joint()
    _annotate(joint.graph, top)
    for path, budget, unannotated in bodies:
        parent, _, name = path.rpartition(".")
        owner = operator.attrgetter(parent)(joint) if parent else joint
        owner.add_module(name, _body(budget, unannotated))
    return joint


def _run(fn, spec: tuple, cap):
    joint = _joint(spec, cap)
    with replay_context(cap):
        try:
            return fn(joint, cap.joint_inputs, **cap.partition_kwargs()), None
        except Exception as e:  # torch raises RuntimeError, remat a RematError
            return None, e


@pytest.mark.parametrize("case", sorted(CASES))
def test_hop_body_budgets_match_torch(case):
    cap = captured_graphs("mlp_gelu_d3")[0]
    expected, theirs = _run(min_cut_rematerialization_partition, CASES[case], cap)
    actual, ours = _run(remat_torch.min_cut_rematerialization_partition, CASES[case], cap)
    if theirs is not None:
        assert ours is not None, f"{case}: torch raised {theirs!r}, remat partitioned"
        assert isinstance(ours, remat.InvalidGraphError), repr(ours)
        if "region_activation_memory_budget" in str(theirs):
            assert str(theirs) in str(ours), f"{case}:\n torch: {theirs}\n remat: {ours}"
        else:  # the range check: torch's message, with remat naming the node
            assert "0 <= m <= 1" in str(theirs) and "0 <= m <= 1" in str(ours), (theirs, ours)
        return
    assert ours is None, f"{case}: torch partitioned, remat raised {ours!r}"
    parity.assert_same_partition(expected, actual, cap.num_fwd_outputs, case)


def test_a_body_budget_changes_the_partition():
    """An agreeing budget of the graph and its bodies is applied (0.0 saves
    other values than 1.0) from torch 2.13 on; before, no release reads it."""
    from remat.torch import _release

    cap = captured_graphs("mlp_gelu_d3")[0]
    saved = {}
    for budget in (0.0, 1.0):
        spec = (budget, [("repeated_subgraph0", budget, 0)])
        (fw, _), err = _run(remat_torch.min_cut_rematerialization_partition, spec, cap)
        assert err is None
        saved[budget] = parity.saved_value_names(fw, cap.num_fwd_outputs)
    assert (saved[0.0] != saved[1.0]) is _release.behaves("region_memory_budget"), saved


def test_bodies_are_exported_and_survive_a_round_trip():
    """The export carries each body under its qualified name; the document
    validates against the schema and the engine writes the bodies back."""
    import json
    from pathlib import Path

    import orjson

    from remat.torch._fx_to_json import export_joint_graph

    cap = captured_graphs("mlp_gelu_d3")[0]
    joint = _joint(CASES["nested_two_deep"], cap)
    doc = export_joint_graph(joint, cap.num_fwd_outputs)
    assert [s["name"] for s in doc["subgraphs"]] == ["outer", "outer.inner"]
    assert [n["name"] for n in doc["subgraphs"][1]["nodes"]] == [n.name for n in joint.outer.inner.graph.nodes]
    schema = json.loads((Path(__file__).resolve().parents[2] / "schema" / "joint_graph.v1.schema.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    back = orjson.loads(remat.roundtrip(doc))
    assert [[n["name"] for n in s["nodes"]] for s in back["subgraphs"]] == \
        [[n["name"] for n in s["nodes"]] for s in doc["subgraphs"]]
