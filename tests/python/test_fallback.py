"""Every failure inside the drop-in is a remat.RematError, and install() falls back on it.

Failures are injected at each step of the drop-in (reading torch's options,
exporting the joint graph, the engine, importing the result). For each:

* remat.torch's partition function raises remat.DropInError naming the step,
  with the original exception as its cause (an exporter failure also names
  the node);
* under ``install()`` (fallback on) torch.compile still trains, with a
  warning, and gives the losses torch's own partitioner gives;
* under ``install(fallback=False)`` the compile fails with that DropInError.

Exceptions of the user's own knapsack solver are torch's behavior, not
remat's failure: test_custom_budget.py pins that they pass unchanged.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import remat
from corpus import CASES_BY_NAME, captured_graphs, run_partition
from corpus.capture import loss_of

remat_torch = pytest.importorskip("remat.torch")
from remat.torch import _dropin, _fx_to_json  # noqa: E402


def _raise(exc: Exception):
    def fail(*args, **kwargs):
        raise exc

    return fail


def _bad_record(self, n):
    # What the nested-tensor export once did: a SymInt in the document,
    # which orjson refuses (after every node was exported).
    record = original_node(self, n)
    if n.op == "output":
        record["val"] = {"kind": "symint", "expr": "s0", "hint": torch.SymInt}
    return record


original_node = _fx_to_json._Exporter.node

# step -> (what to patch, replacement, exception type expected as __cause__)
INJECTIONS = {
    "options": (lambda mp: mp.setattr(_dropin, "_options_from_torch", _raise(KeyError("cse"))), KeyError),
    "export": (lambda mp: mp.setattr(_fx_to_json._Exporter, "value", _raise(TypeError("not serializable"))),
               TypeError),
    "export_serialize": (lambda mp: mp.setattr(_fx_to_json._Exporter, "node", _bad_record), TypeError),
    "engine": (lambda mp: mp.setattr(remat, "partition", _raise(IndexError("engine broke"))), IndexError),
    "import": (lambda mp: mp.setattr(_dropin, "import_own_result", _raise(ValueError("bad result"))),
               ValueError),
}


def _step_of(name: str) -> str:
    return name.split("_")[0]


@pytest.mark.parametrize("injection", sorted(INJECTIONS))
def test_every_failure_is_a_drop_in_error_naming_its_step(injection, monkeypatch):
    patch, cause = INJECTIONS[injection]
    cap = captured_graphs("mlp_gelu_d3")[0]
    patch(monkeypatch)
    with pytest.raises(remat.DropInError) as info:
        run_partition(remat_torch.min_cut_rematerialization_partition, cap)
    assert info.value.step == _step_of(injection)
    assert isinstance(info.value.__cause__, cause)
    assert f"'{_step_of(injection)}'" in str(info.value) or "cannot export node" in str(info.value)


def test_export_failure_names_the_node(monkeypatch):
    cap = captured_graphs("mlp_gelu_d3")[0]
    monkeypatch.setattr(_fx_to_json._Exporter, "value", _raise(TypeError("not serializable")))
    with pytest.raises(remat.DropInError) as info:
        run_partition(remat_torch.min_cut_rematerialization_partition, cap)
    first = next(iter(cap.joint_module.graph.nodes)).name
    assert info.value.node == first and repr(first) in str(info.value)


def _train(model_case: str) -> list[float]:
    case = CASES_BY_NAME[model_case]
    torch._dynamo.reset()
    model, inputs = case.make_module(), case.make_inputs()
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    with torch._functorch.config.patch(enable_autograd_cache=False):
        for _ in range(2):
            optimizer.zero_grad()
            loss = loss_of(compiled(*inputs))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    torch._dynamo.reset()
    return losses


@pytest.mark.parametrize("injection", sorted(INJECTIONS))
def test_install_falls_back_with_a_warning(injection, monkeypatch):
    reference = _train("mlp_gelu_d3")
    INJECTIONS[injection][0](monkeypatch)
    remat_torch.install()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            losses = _train("mlp_gelu_d3")
    finally:
        remat_torch.uninstall()
    assert any("falling back to torch's partitioner" in str(w.message) and "DropInError" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    assert losses == reference


def test_without_fallback_the_error_reaches_the_caller(monkeypatch):
    INJECTIONS["engine"][0](monkeypatch)
    remat_torch.install(fallback=False)
    try:
        with pytest.raises(Exception) as info:
            _train("mlp_gelu_d3")
    finally:
        remat_torch.uninstall()
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(x, remat.DropInError) and x.step == "engine" for x in chain), chain
