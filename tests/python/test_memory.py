"""The simulated peak memory is the measured one.

For every joint graph of the parity corpus, plans are partitioned at several
budgets (torch's activation budgets, and remat's peak-memory budget at the
smallest peak each search reaches: torch_plans under every release, fast
under the main one), their forward/backward modules run on CPU under
a tracker of live tensor storages (memtrack.py), and the measured peak must
equal, byte for byte, the engine's ``memory.peak_bytes`` for remat's plans and
``remat.torch.simulate_memory`` for torch's own plans.

Then the peak budget from Python: ``remat.torch.peak_memory_budget`` leaves
torch's config alone, a smaller limit never gives a higher peak on the
corpus, and a limit nothing meets raises ``BudgetUnreachableError`` naming
the smallest reachable peak.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch._functorch.config as functorch_config
from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_min_cut

import remat
from corpus import CASES, captured_graphs, run_partition
from corpus.capture import replay_context
from memtrack import measure_step

ACTIVATION_BUDGETS = (1.0, 0.5, 0.1)


@pytest.fixture(scope="session")
def rt():
    return pytest.importorskip("remat.torch")


def _remat_plan(rt, cap, **options):
    joint = cap.fresh_joint()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hazard warnings: test_hazards.py
        opts = rt.options_from_torch(**options)
        return rt.partition(joint, options=opts, **cap.partition_kwargs())


def _smallest_peak(rt, cap, search: str = "fast") -> int:
    with pytest.raises(remat.BudgetUnreachableError) as err:
        _remat_plan(rt, cap, peak_memory_budget=1, peak_search=search)
    return err.value.smallest_peak


def _assert_measured_as_simulated(cap, plans: dict) -> None:
    for label, p in plans.items():
        measured = measure_step(p.forward, p.backward, cap.num_fwd_outputs)
        simulated = p.result["memory"]["peak_bytes"]
        assert simulated == measured.peak, (
            f"{cap.label}, {label}: simulated {simulated} bytes at {p.result['memory']['peak_at']}, "
            f"measured {measured.peak} at {measured.peak_at}")


def _smallest_plan(rt, cap, search: str):
    """The plan at the smallest peak `search` reaches (the limit 1 byte names
    it), which has that peak."""
    smallest = _smallest_peak(rt, cap, search)
    plan = _remat_plan(rt, cap, peak_memory_budget=smallest, peak_search=search)
    assert plan.result["memory"]["peak_bytes"] == smallest, f"{cap.label}, {search}"
    return plan


# Under every release the leanest plan is torch_plans' (torch's own budget
# plans and their repairs: no MILP); fast's, whose smallest-peak search is
# remat's own and costs seconds a graph, is measured under the main release
# below.
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulated_peak_equals_measured_peak(case, rt):
    for cap in captured_graphs(case.name):
        plans = {f"activation budget {b}": _remat_plan(rt, cap, activation_memory_budget=b)
                 for b in ACTIVATION_BUDGETS}
        plans["peak budget (smallest, torch_plans)"] = _smallest_plan(rt, cap, "torch_plans")
        _assert_measured_as_simulated(cap, plans)

        # torch's own plan, through the module-pair function.
        fw, bw = run_partition(torch_min_cut, cap, activation_memory_budget=0.5)
        simulated = rt.simulate_memory(fw, bw)["memory"]["peak_bytes"]
        measured = measure_step(fw, bw, cap.num_fwd_outputs)
        assert simulated == measured.peak, (
            f"{cap.label}, torch's plan at budget 0.5: simulated {simulated}, measured {measured.peak}")


@pytest.mark.one_release
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_smallest_peak_fast_reaches_is_the_measured_peak(case, rt):
    for cap in captured_graphs(case.name):
        _assert_measured_as_simulated(cap, {"peak budget (smallest, fast)": _smallest_plan(rt, cap, "fast")})


def test_simulate_memory_infers_num_fwd_outputs(rt):
    (cap,) = captured_graphs("mlp_gelu_d3")
    fw, bw = run_partition(torch_min_cut, cap)
    inferred = rt.simulate_memory(fw, bw)
    explicit = rt.simulate_memory(fw, bw, cap.num_fwd_outputs)
    assert inferred == explicit
    assert explicit["memory"]["peak_bytes"] == measure_step(fw, bw, cap.num_fwd_outputs).peak
    assert len(explicit["memory"]["timeline"]["forward"]) == len(fw.graph.nodes)
    assert len(explicit["memory"]["timeline"]["backward"]) == len(bw.graph.nodes)


MONOTONE_CASES = ["cnn_bn_maxpool", "transformer_block", "lstm_unrolled", "resnet_basic_block",
                  "checkpoint_transformer_block", "mlp_relu_d6"]


@pytest.mark.one_release
@pytest.mark.parametrize("name", MONOTONE_CASES)
def test_a_smaller_peak_budget_never_gives_a_higher_peak(name, rt):
    (cap, *_) = captured_graphs(name)
    top = _remat_plan(rt, cap).result["memory"]["peak_bytes"]
    bottom = _smallest_peak(rt, cap)
    limits = sorted({top * 2, top, top - 1, bottom, bottom - 1,
                     *(bottom + (top - bottom) * k // 8 for k in range(1, 8))}, reverse=True)
    previous, failed = None, False
    for limit in limits:
        try:
            peak = _remat_plan(rt, cap, peak_memory_budget=limit).result["memory"]["peak_bytes"]
        except remat.BudgetUnreachableError:
            assert limit < bottom, f"{name}: limit {limit} unreachable but {bottom} is reachable"
            failed = True
            continue
        assert not failed, f"{name}: limit {limit} met after a larger one failed"
        assert peak <= limit
        assert previous is None or peak <= previous, f"{name}: limit {limit} gave {peak} > {previous}"
        previous = peak


def test_peak_memory_budget_leaves_torch_config_alone(rt):
    before = functorch_config.get_config_copy()
    with rt.peak_memory_budget(123456):
        assert rt.get_peak_memory_budget() == 123456
        assert rt.options_from_torch()["peak_memory_budget"] == 123456
        with rt.peak_memory_budget(None):
            assert rt.options_from_torch()["peak_memory_budget"] == 0
    assert rt.get_peak_memory_budget() == 0
    assert functorch_config.get_config_copy() == before
    with pytest.raises(remat.InvalidOptionError):
        rt.set_peak_memory_budget(-1)


def test_an_unreachable_peak_budget_names_the_smallest_peak(rt):
    (cap,) = captured_graphs("mlp_gelu_d3")
    smallest = _smallest_peak(rt, cap)
    with pytest.raises(remat.BudgetUnreachableError, match=rf"smallest (?:reachable peak|peak found) is .*\({smallest} bytes\)"):
        _remat_plan(rt, cap, peak_memory_budget=smallest - 1)


def test_a_compiled_model_under_the_tightest_peak_budget_trains_as_eager(rt):
    """The drop-in reads the limit at compile time; the plan it makes computes what eager does."""
    from corpus.capture import compile_case, loss_of, make_backend
    from corpus.models import CASES_BY_NAME

    case = CASES_BY_NAME["cnn_bn_maxpool"]
    (cap,) = captured_graphs(case.name)
    smallest = _smallest_peak(rt, cap)
    assert smallest < _remat_plan(rt, cap).result["memory"]["peak_bytes"]  # a plan of its own
    results = {}
    for mode in ("eager", "peak"):
        model, inputs = case.make_module(), case.make_inputs()
        fn = model
        if mode == "peak":
            fn = compile_case(case, model, make_backend(case, rt.min_cut_rematerialization_partition), inputs)
        with rt.peak_memory_budget(smallest):
            loss = loss_of(fn(*inputs))
            loss.backward()
        torch._dynamo.reset()
        results[mode] = [loss.detach()] + [p.grad for p in model.parameters()]
    for a, b in zip(results["eager"], results["peak"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
