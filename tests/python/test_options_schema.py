"""schema/partition_options.v1.schema.json describes the options object the
engine reads (remat::read_options): example options validate against the
schema and the engine accepts them; options the schema rejects, the engine
rejects too, with an error naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")
remat = pytest.importorskip("remat")

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schema" / "partition_options.v1.schema.json").read_text())
GRAPH = (ROOT / "examples" / "mlp.json").read_bytes()

EXAMPLES = {
    "empty": {},
    "budget": {"activation_memory_budget": 0.5, "activation_memory_budget_solver": "greedy",
               "activation_memory_budget_runtime_estimator": "testing"},
    "bans": {"recompute_views": True, "ban_recompute_reductions": False,
             "ban_recompute_not_in_allowlist": False, "max_dist_from_bw": 3,
             "aggressive_recomputation": True},
    "remat_own": {"cut_side": "source_minimal", "trace": True, "keep_snapshots": True,
                  "peak_memory_budget": 0, "graphsafe_rng_device_types": ["cuda", "xpu"],
                  "ops": {"aten.mm": ["recomputable", "compute_intensive"]}},
    "fp8": {"activation_quantization": {"size_in_mb": 0, "allowed_dtypes": "torch.float32",
                                        "quant_type": "torch.float8_e4m3fn",
                                        "use_scaling": True}},
    "fp8_off": {"activation_quantization": None},
    "peak_search": {"peak_memory_budget": 0, "peak_search": "exact", "peak_search_seconds": 5,
                    "peak_search_nodes": 100},
    "backward_order": {"backward_order": "memory"},
}

# Wrong in a way the schema can state; the engine's message names the key.
BAD = {
    "unknown key": ({"bogus": 1}, "bogus"),
    "bool as int": ({"cse": 3}, "cse"),
    "budget range": ({"activation_memory_budget": 2.0}, "activation_memory_budget"),
    "cut side": ({"cut_side": "middle"}, "cut_side"),
    "category": ({"ops": {"aten.mm": ["cheap"]}}, "category"),
    "negative distance": ({"max_dist_from_bw": -1}, "max_dist_from_bw"),
    "quantization key": ({"activation_quantization": {"size": 1}}, "activation_quantization.size"),
    "peak search name": ({"peak_search": "greedy"}, "peak_search"),
    "peak search seconds": ({"peak_search_seconds": -1}, "peak_search_seconds"),
    "peak search nodes": ({"peak_search_nodes": -1}, "peak_search_nodes"),
    "backward order": ({"backward_order": "fifo"}, "backward_order"),
}


def validator():
    cls = jsonschema.validators.validator_for(SCHEMA)
    cls.check_schema(SCHEMA)
    return cls(SCHEMA)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_options_match_the_schema_and_the_engine_reads_them(name):
    options = EXAMPLES[name]
    validator().validate(options)
    remat.partition(GRAPH, options)


@pytest.mark.parametrize("name", sorted(BAD))
def test_options_the_schema_rejects_the_engine_rejects_naming_the_key(name):
    options, key = BAD[name]
    assert not validator().is_valid(options)
    with pytest.raises(remat.InvalidOptionError, match=key.replace(".", r"\.")):
        remat.partition(GRAPH, options)


def test_every_schema_key_is_an_option_the_engine_reads():
    # Each property at its schema default (or a value of its type): the
    # engine knows every key the schema documents.
    samples = {"activation_quantization": None, "profiled_runtimes": [],
               "ops": {"aten.mm": ["compute_intensive"]}, "torch_release": "2.14",
               "torch_switches": {"cse_partition_key": False}}
    for key, prop in SCHEMA["properties"].items():
        options = {key: samples[key] if key in samples else prop["default"]}
        validator().validate(options)
        remat.partition(GRAPH, options)


def test_an_ops_key_that_matches_no_operator_warns_from_python():
    """A setting that does nothing says so: an overload name where the
    categories are keyed by packet warns, naming the key, from each entry
    point that takes options; a key the graph has stays silent."""
    graph = (ROOT / "examples" / "transformer_block.json").read_bytes()
    typo = {"ops": {"aten.transpose.int": ["recomputable"]}}
    with pytest.warns(UserWarning, match=r"'aten\.transpose\.int' matches no operator"):
        remat.partition(graph, typo)
    with pytest.warns(UserWarning, match=r"'aten\.transpose\.int' matches no operator"):
        remat.pareto(graph, typo)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        remat.partition(graph, {"ops": {"aten.transpose": ["recomputable"]}})
