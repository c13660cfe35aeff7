"""The drop-in's own round trip skips the document checks; the public import keeps them.

Contract pinned here (remat/torch/_json_to_fx.py import_own_result,
docs/format.md "Trust"): the drop-in imports the result the engine made, in
this process, from the live joint graph's export, without _doc_checks'
checks (on graphs of a few nodes they were its largest fixed cost,
bench/bench_small_dynamic.py); `remat.torch.import_result`, the public
entry, still runs every check, so the same result with a hostile node is
refused there.
"""

from __future__ import annotations

import copy

import pytest
import torch

import remat
import remat.torch as rt
from remat.torch import _doc_checks, _dropin, _json_to_fx
from remat.torch._fx_to_json import export_joint_graph

from corpus import dynamic_joint


def _joint() -> tuple[torch.fx.GraphModule, dict]:
    """A small dynamic-shape joint graph (symbolic sizes and the symbolic
    arithmetic of their nodes) with the partition call's keyword arguments."""
    weight = torch.randn(4, 4, requires_grad=True)
    return dynamic_joint(lambda x: (x @ weight).sin().reshape(-1).sum(), torch.randn(5, 4))


def _refuse(*args, **kwargs):
    raise AssertionError("a document check ran")


@pytest.mark.one_release
def test_drop_in_round_trip_runs_no_document_checks(monkeypatch):
    gm, kwargs = _joint()
    for name in ("meta_strings", "name", "kwargs_key", "placeholder_target", "attribute_path",
                 "check_parameters"):
        monkeypatch.setattr(_doc_checks, name, _refuse)
    monkeypatch.setattr(_doc_checks.LiteralBounds, "add", _refuse)
    fw, bw = rt.default_partition(gm, None, **kwargs)
    assert len(fw.graph.nodes) > 1 and len(bw.graph.nodes) > 1


def _own_result() -> tuple[dict, torch.fx.GraphModule, list]:
    """The drop-in's own result for the joint graph: what import_own_result reads."""
    gm, kwargs = _joint()
    handles: list = []
    doc = export_joint_graph(gm, kwargs["num_fwd_outputs"], kwargs.get("static_lifetime_input_indices"),
                             as_json=True, handles=handles)
    return remat.partition(doc, _dropin.options_from_torch(), "default", as_json=False), gm, handles


def _rename_first(nodes: list) -> None:
    nodes[0]["name"] = "__import__('os').system('true')"


def _triple_quote_meta(nodes: list) -> None:
    nodes[-2].setdefault("meta", {})["partitioner_tag"] = 'is_forward"""; import os; """'


def _placeholder_shadows_builtin(nodes: list) -> None:
    nodes[0]["target"] = "print"


def _kwargs_key(nodes: list) -> None:
    call = next(nd for nd in nodes if nd["op"] == "call_function")
    call.setdefault("kwargs", {})["x=__import__('os')"] = 1


@pytest.mark.one_release
@pytest.mark.parametrize("hostile", [_rename_first, _triple_quote_meta, _placeholder_shadows_builtin,
                                     _kwargs_key])
def test_public_import_result_still_refuses_a_hostile_result(hostile):
    result, gm, handles = _own_result()
    rt.import_result(copy.deepcopy(result), gm, handles)  # the engine's own result imports
    hostile(result["forward"]["nodes"])
    with pytest.raises(remat.InvalidGraphError):
        rt.import_result(result, gm, handles)


@pytest.mark.one_release
def test_own_result_import_equals_the_checked_import():
    result, gm, handles = _own_result()
    checked = rt.import_result(copy.deepcopy(result), gm, handles)
    own = _json_to_fx.import_own_result(result, gm, handles)
    for a, b in zip(checked, own):
        assert a.code == b.code
