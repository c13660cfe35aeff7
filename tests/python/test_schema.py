"""The JSON schemas in schema/ describe what remat actually reads and writes:
every shipped example joint graph, and the partition results remat writes for
them (min-cut, default, and under a memory budget), validate against them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")
remat = pytest.importorskip("remat")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.json"))


def _load(name: str) -> dict:
    return json.loads((ROOT / "schema" / name).read_text())


JOINT = _load("joint_graph.v1.schema.json")
RESULT = _load("partition_result.v1.schema.json")
REGISTRY = referencing.Registry().with_resources(
    [(s["$id"], referencing.Resource.from_contents(s)) for s in (JOINT, RESULT)])


def validator(schema: dict):
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, registry=REGISTRY)


def test_examples_exist():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_joint_graphs_match_the_schema(path):
    validator(JOINT).validate(json.loads(path.read_text()))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("run", [("min_cut", {}), ("default", {}),
                                 ("min_cut", {"activation_memory_budget": 0.5}),
                                 ("min_cut", {"activation_memory_budget": 0.1, "trace": True,
                                              "visualize_memory_budget_pareto": True}),
                                 ("default", {"activation_quantization": {
                                     "size_in_mb": 0, "allowed_dtypes": "torch.float32"},
                                     "keep_snapshots": True, "trace": True}),
                                 ("min_cut", {"memory_model": "inductor"}),
                                 ("min_cut", {"memory_model": "inductor", "inductor_reorder": False})],
                         ids=["min_cut", "default", "budget", "trace", "fp8", "inductor", "inductor_in_order"])
def test_partition_results_match_the_schema(path, run):
    partitioner, options = run
    result = remat.partition(path.read_bytes(), options, partitioner, as_json=False)
    validator(RESULT).validate(result)
    # Under inductor's model the kernel orders simulated are named, the
    # graph's own first, unless the reorder pass is off.
    reorder = options.get("memory_model") == "inductor" and options.get("inductor_reorder", True)
    assert ("kernel_orders" in result["memory"]) == reorder
    if reorder:
        assert all(result["memory"]["kernel_orders"][g]["simulated"][0] == "graph" for g in ("forward", "backward"))
    assert list(result["stages"])[0] == "prepare"
    assert sum(result["stages"].values()) == pytest.approx(result["seconds"], abs=1e-6)


def test_results_missing_or_adding_fields_are_rejected():
    result = remat.partition((ROOT / "examples" / "mlp.json").read_bytes(), as_json=False)
    missing = dict(result)
    del missing["saved_values"]
    with pytest.raises(jsonschema.ValidationError):
        validator(RESULT).validate(missing)
    # The result schema lists every field remat writes, so a new one must be
    # documented there.
    with pytest.raises(jsonschema.ValidationError):
        validator(RESULT).validate({**result, "undocumented": 1})


def test_exported_cse_facts_match_the_schema_and_read_back():
    """What torch 2.13-2.14's CSE and DCE compare, as the exporter writes it:
    a packet target (kind "packet"), a NaN with its sign bit ("bits"), a node
    on another stream ("custom_context")."""
    torch = pytest.importorskip("torch")
    rt = pytest.importorskip("remat.torch")
    g = torch.fx.Graph()
    x = g.placeholder("primals_1")
    x.meta["val"] = torch.empty(3, device="meta")
    rand = g.call_function(torch.ops.aten.rand, ([3],), name="rand")
    neg_nan = g.call_function(torch.ops.aten.add.Tensor, (x, -float("nan")), name="add")
    neg_nan.meta["custom"] = {"stream": 1}
    g.output((rand, neg_nan))
    doc = rt.export_joint_graph(g, 2)
    validator(JOINT).validate(doc)
    op = next(o for o in doc["ops"] if o["name"] == "aten.rand")
    assert op["kind"] == "packet" and op["tags"] == ["nondeterministic_seeded"]
    add = next(n for n in doc["nodes"] if n["name"] == "add")
    assert add["args"][1] == {"float": "nan", "bits": "fff8000000000000"}
    assert add["meta"]["custom_context"] == [1, None, None]
    back = json.loads(remat.roundtrip(doc))
    back_add = next(n for n in back["nodes"] if n["name"] == "add")
    assert back_add["args"] == add["args"] and back_add["meta"] == add["meta"]
    back_op = next(o for o in back["ops"] if o["name"] == "aten.rand")
    assert (back_op["kind"], back_op["tags"]) == ("packet", ["nondeterministic_seeded"])
