"""The exporter's process-wide caches (remat/torch/_fx_to_json.py).

Contract pinned here: an op target's name and facts, a symbolic
expression's printed form and a raw expression's free symbols are computed
once per process, not once per export (on small dynamic-shape graphs they
were the drop-in's largest fixed cost, bench/bench_small_dynamic.py); the
size hints are not cached across exports, since each graph's ShapeEnv has
its own.
"""

from __future__ import annotations


import pytest
import torch

from remat.torch import _fx_to_json
from remat.torch._fx_to_json import export_joint_graph

from corpus import dynamic_joint


def _joint(size: int) -> tuple[torch.fx.GraphModule, dict]:
    """The joint graph torch.compile(dynamic=True) hands the partitioner for
    an input of `size` rows, with the partition call's keyword arguments."""
    weight = torch.randn(4, 4, requires_grad=True)
    return dynamic_joint(lambda x: (x @ weight).sin().sum(), torch.randn(size, 4))


def _export(joint: tuple) -> dict:
    gm, kwargs = joint
    return export_joint_graph(gm, kwargs["num_fwd_outputs"], kwargs.get("static_lifetime_input_indices"),
                              as_json=False, handles=[])


def _hints(doc: dict) -> set:
    return {(d["expr"], d["hint"]) for nd in doc["nodes"] if nd.get("val", {}).get("kind") == "tensor"
            for d in nd["val"]["shape"] if isinstance(d, dict)}


@pytest.mark.one_release
def test_op_facts_and_expressions_are_computed_once_per_process(monkeypatch):
    joint = _joint(5)
    caches = (_fx_to_json._TARGETS, _fx_to_json._EXPRS, _fx_to_json._RAW_NAMES)
    for cache in caches:
        cache.clear()
    first = _export(joint)
    assert all(caches)

    def computed_again(*_args):
        raise AssertionError("an op's facts or an expression's text was computed again")

    monkeypatch.setattr(_fx_to_json, "_remember", computed_again)
    again = _export(joint)
    assert again == first


@pytest.mark.one_release
def test_size_hints_stay_with_each_graphs_shape_env():
    five, seven = _joint(5), _joint(7)
    _fx_to_json._TARGETS.clear()
    _fx_to_json._EXPRS.clear()
    hints_five, hints_seven = _hints(_export(five)), _hints(_export(seven))
    assert hints_five and hints_seven
    # dynamic=True makes both sizes symbolic: the rows (5 or 7) and the width (4).
    assert {h for _, h in hints_five} == {5, 4} and {h for _, h in hints_seven} == {7, 4}
    assert {e for e, _ in hints_five} == {e for e, _ in hints_seven}  # the same printed expressions
