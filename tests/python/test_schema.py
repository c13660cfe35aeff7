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
                                              "visualize_memory_budget_pareto": True})],
                         ids=["min_cut", "default", "budget", "trace"])
def test_partition_results_match_the_schema(path, run):
    partitioner, options = run
    result = remat.partition(path.read_bytes(), options, partitioner, as_json=False)
    validator(RESULT).validate(result)
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
