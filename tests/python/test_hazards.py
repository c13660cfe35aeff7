"""Plans that never fail at run time: the BatchNorm case.

A BatchNorm training step updates the running statistics in place. With
AOTAutograd's default (input mutations kept out of the graph), the joint
graph returns the new statistics and the runtime wrapper copies them into the
buffers after the forward, after saving tensors for the backward. Under an
activation memory budget torch's partitioner recomputes the batch norm in the
backward, from the saved running statistics: the backward then fails
autograd's version-counter check. remat, in parity mode, makes the same plan
and warns naming the nodes; under a peak-memory budget it never returns such
a plan.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._functorch.config as functorch_config
from torch import nn
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_min_cut

INPLACE_ERROR = "modified by an inplace operation"


@pytest.fixture(scope="session")
def rt():
    return pytest.importorskip("remat.torch")


class BatchNormMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.bn, self.fc2 = nn.Linear(32, 256), nn.BatchNorm1d(256), nn.Linear(256, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def _boxed(gm, _inputs):
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def train_step(partition_fn=None) -> dict:
    """One step of a fresh model: eager without `partition_fn`, else compiled with it."""
    torch.manual_seed(0)
    model = BatchNormMLP()
    x = torch.randn(512, 32, generator=torch.Generator().manual_seed(1), requires_grad=True)
    fn = model
    if partition_fn is not None:
        backend = aot_autograd(fw_compiler=_boxed, bw_compiler=_boxed, partition_fn=partition_fn)
        torch._dynamo.reset()
        fn = torch.compile(model, backend=backend)
    try:
        loss = fn(x).square().mean()
        loss.backward()
    finally:
        torch._dynamo.reset()
    state = {"loss": loss.detach(), "x.grad": x.grad}
    state.update({f"grad {n}": p.grad for n, p in model.named_parameters()})
    state.update({f"buffer {n}": b.clone() for n, b in model.named_buffers()})
    return state


def recording(partition_fn, sink: list):
    def fn(joint, inputs, **kwargs):
        from remat.torch._fx_to_json import _mutated_inputs

        sink.append(_mutated_inputs(joint.graph))
        fw, bw = partition_fn(joint, inputs, **kwargs)
        sink.append((fw, bw))
        return fw, bw

    return fn


def test_torchs_plan_under_a_budget_fails_and_the_simulator_names_why(rt):
    seen: list = []
    with functorch_config.patch(activation_memory_budget=0.5):
        with pytest.raises(RuntimeError, match=INPLACE_ERROR):
            train_step(recording(torch_min_cut, seen))
    mutated, (fw, bw) = seen
    assert mutated == ["primals_4", "primals_5", "primals_6"]  # num_batches_tracked, running stats
    hazards = rt.simulate_memory(fw, bw, mutated_inputs=mutated)["hazards"]
    assert {h["saved"] for h in hazards} == {"primals_5", "primals_6"}
    for h in hazards:
        assert h["mutated_by"] is None  # after the forward, by AOTAutograd's runtime wrapper
        assert h["readers"] == ["_native_batch_norm_legit_functional"]
    # Without the runtime's mutations the same plan is safe.
    assert rt.simulate_memory(fw, bw)["hazards"] == []


def test_remat_keeps_torchs_plan_and_warns_naming_the_nodes(rt):
    with functorch_config.patch(activation_memory_budget=0.5):
        with pytest.warns(rt.RematHazardWarning) as record, pytest.raises(RuntimeError, match=INPLACE_ERROR):
            train_step(rt.min_cut_rematerialization_partition)
    messages = [str(w.message) for w in record if issubclass(w.category, rt.RematHazardWarning)]
    assert any("'primals_5'" in m and "'_native_batch_norm_legit_functional'" in m
               and "after the forward returns" in m for m in messages), messages


def test_no_warning_without_a_hazard(rt):
    with warnings.catch_warnings():
        warnings.simplefilter("error", rt.RematHazardWarning)
        state = train_step(rt.min_cut_rematerialization_partition)  # budget 1: nothing recomputed from the stats
    expected = train_step()
    for key, value in expected.items():
        torch.testing.assert_close(state[key], value, rtol=1e-4, atol=1e-5, msg=key)


def test_a_peak_budget_never_returns_a_hazardous_plan(rt):
    results: list = []

    def remat_partition(joint, _inputs, **kwargs):
        p = rt.partition(joint, **kwargs)
        results.append(p.result)
        return p.forward, p.backward

    # Below the peak of every plan torch's activation budgets give: the
    # cheapest plans that fit recompute the batch norm, as torch's do; remat
    # must return them repaired (the batch norm's results saved instead).
    torch_peaks = []
    for budget in (1.0, 0.5, 0.1, 0.0):
        with functorch_config.patch(activation_memory_budget=budget), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                train_step(remat_partition)
            except RuntimeError:
                pass
        torch_peaks.append(results.pop()["memory"]["peak_bytes"])
    with rt.peak_memory_budget(min(torch_peaks) - 1):
        state = train_step(remat_partition)
    (result,) = results
    assert result["hazards"] == []
    assert result["memory"]["peak_bytes"] < min(torch_peaks)
    assert any(d["where"] == "recomputed" for d in result["decisions"].values())
    expected = train_step()
    for key, value in expected.items():
        torch.testing.assert_close(state[key], value, rtol=1e-4, atol=1e-5, msg=key)
