"""How a peak-memory plan is searched: torch_plans, fast and exact agree with
each other and with the measured step.

Contract: on the parity corpus's graphs where a peak limit changes the plan
(the smallest reachable peak is below the runtime-optimized plan's), at three
limits each (the smallest reachable peak, the midpoint, the runtime-optimized
peak minus one byte), these rules hold:

* every plan "fast" and "exact" return fits the limit, has no hazard, and the
  live-storage tracker (memtrack.py) measures exactly its simulated peak;
* "exact" recomputes no more than "torch_plans" or "fast" at the same limit,
  and finds a plan wherever either does;
* where "exact" proved its plan optimal, "fast" finds a plan within 5 % of it;
* on PROVEN_CASES "exact" proves the optimum at every limit;
* with nothing reachable, "exact" names the smallest reachable peak (which a
  limit of exactly that meets) and a proven lower bound no search undercuts;
* a proven lower bound of the recompute is never above a plan found;
* a model compiled under ``peak_memory_budget(..., search="exact")`` trains
  as eager does;
* on a deep residual stack (a large space) fast's checkpointed plans reach
  below half of torch's smallest peak, and halfway between the two its plan
  fits, measures as simulated and trains as eager does (under the main
  release only: remat's own search);
* the Python setting validates its arguments, keeps the bare-``nbytes`` form
  (fast), and the drop-in passes the search only with a limit.

Every rule but the last pins remat's own searches, not a release's
partitioner, so it runs under the main release only (one_release; the
searches cost about 300 s of CPU per release). The last runs under every
release: it meets each release's config and drop-in path.

The rules comparing exact with the others run where exact proves its plan
within its default node budget (EXACT_CASES). Where it does not
(SLOW_CASES), exact runs SLOW_NODES solver nodes and only the rules that
hold whatever the budget are pinned (searches stop on counted work, so
either way the plans are the same on every machine). A graph the running
release leaves no room (its smallest reachable peak is the runtime-optimized
one) is skipped; test_most_listed_graphs_leave_room fails when more than two
are. Plans are cached per
(graph, search, limit) for the module: the rules compare the same plans, and
each is built once.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Union

import pytest
import torch

import remat
from corpus import captured_graphs
from corpus.capture import replay_context
from memtrack import measure_step

# The corpus cases whose smallest reachable peak is below their
# runtime-optimized plan's (found by partitioning every case with a limit of
# 1 byte under each search; on the others every limit either keeps torch's
# plan or is unreachable, and the searches have nothing to choose), under
# torch 2.13. test_most_listed_graphs_leave_room checks that premise, so a
# corpus or engine change cannot empty the rules silently.
# (layernorm_mlp_inductor was one until f532b46: exact reached 10512 bytes
# there, now 10528, its runtime-optimized peak.)
#
# Where exact proves its answer within a second or two at every limit here
# but one: mlp_gelu_d3_inductor's smallest reachable peak, 1888 bytes since
# exact's smallest-peak search adds its lazy rows (1936 before), where exact
# runs to its 20 s (fast finds a plan there too).
EXACT_CASES = [
    "mlp_gelu_d3_inductor", "cnn_bn_maxpool", "resnet_basic_block", "layernorm_mlp",
    "checkpoint_dropout", "checkpoint_dropout_inductor", "sac_save_mm_dropout",
    "sac_transformer_block_inductor", "nested_jagged_mlp", "dynamic_checkpoint_dropout",
    "batchnorm1d_running_stats", "cross_entropy", "residual_mlp", "view_heavy",
    "transformer_block_inductor", "transformer_block", "resnet_basic_block_inductor", "gru_unrolled",
]
# Where exact runs into a 20 s limit at some of them (its no-good cuts close
# slowly) or takes over 5 s on this 2-core machine.
# lstm_unrolled was here from a7ba3ba: exact needed about 140 MILP rounds
# (19 s) to prove its smallest reachable peak's optimum (recompute 1), each
# cutting off one plan, most of them plans the model itself rejects (a
# saved value kept alive by a recomputed user made later, which the MILP's
# rows relax), and fast's polish stopped at 6. With those rows added back
# lazily, both prove 1 in two rounds (0.1 s); but with the model fixes
# below its smallest reachable peak went down to 5984 bytes, where neither
# proved within 20 s (both found 1550); with the model following views
# recomputed from a saved value both prove 1547 there in 2 s, but not
# 6144 bytes (1549 found), so it stays here. resnet_basic_block_inductor
# and gru_unrolled left on 2026-12-03, when the model learned what keeps a
# storage alive (a saved view's or a recomputed view's readers, batch
# norm's backward making forward values at their own place): each of their
# limits proves in about a second (gru_unrolled at 4928 bytes: recompute
# 397 proven, where both had returned 1169 unproven).
# transformer_block_inductor proves every limit within 3 s now. transformer_block needed 8-13 s and
# fast stopped at 3 where the optimum is 1: the model missed the attention
# backward's outputs at its own row (counted from the getitems on) and
# that split's getitems keep the QKV projection's storage; with both, the
# model's peak is the simulated one there and exact proves each limit in
# one round.
SLOW_CASES = [
    "cnn_bn_avgpool_inductor", "cross_entropy_inductor", "lstm_unrolled_inductor", "lstm_unrolled",
]
CASES = EXACT_CASES + SLOW_CASES
# Where exact proves the optimum at every limit, far within its 20 s (0.1
# to 2.1 s under each release): transformer_block_inductor's smallest
# reachable peak took exact past 20 s before its lazy rows (recompute 15
# found, not proven; now 2, proven in one round), transformer_block's
# limits 8 to 13 s before the model counted a multi-output op's outputs
# from the op's row and split's getitems as views of its input.
# resnet_basic_block_inductor and gru_unrolled: 0.1 to 1.3 s per limit
# since 2026-12-03 (above).
PROVEN_CASES = [
    "transformer_block_inductor", "transformer_block", "resnet_basic_block_inductor", "gru_unrolled",
]
# An EXACT_CASES limit where exact is known not to prove quickly
# (mlp_gelu_d3_inductor's smallest reachable peak, above): it runs
# SLOW_NODES there, as a SLOW_CASES search does. No rule is lost:
# those comparing with exact's optimum skip a limit it did not prove, and
# the rest hold whatever the time. It saved 18 s under each release.
SLOW_SMALLEST = {"mlp_gelu_d3_inductor"}
SEARCHES = ("torch_plans", "fast", "exact")
SLOW_NODES = 200  # solver nodes of exact where it does not prove quickly
REL = 1e-9  # float sums of the same estimates in another order

Outcome = Union["remat.torch.Partition", remat.BudgetUnreachableError]


@pytest.fixture(scope="module")
def rt():
    return pytest.importorskip("remat.torch")


def _graph(name: str):
    (cap, *_) = captured_graphs(name)
    return cap


@functools.lru_cache(maxsize=None)
def _plan(name: str, search: str, limit: int) -> Outcome:
    """The plan `search` makes for case `name` under `limit` (0: no limit),
    or the BudgetUnreachableError it raises."""
    import remat.torch as rt

    cap = _graph(name)
    options = {"peak_memory_budget": limit}
    if limit:
        slow = name not in EXACT_CASES or (name in SLOW_SMALLEST and limit > 1 and limit == _bounds(name)[1])
        options.update(peak_search=search)
        if slow:
            options.update(peak_search_nodes=SLOW_NODES)
    joint = cap.fresh_joint()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hazard warnings: test_hazards.py
        try:
            return rt.partition(joint, options=rt.options_from_torch(**options),
                                **cap.partition_kwargs())
        except remat.BudgetUnreachableError as e:
            return e


# "reachable" only where the bound proves it the least; "found" otherwise.
_SMALLEST = re.compile(r"smallest (?:reachable peak|peak found) is .*?\((\d+) bytes\)")
_BELOW = re.compile(r"no valid plan has a peak below .*?\((\d+) bytes\) \(proven\)")
_NONE_SMALLER = "no valid plan has a smaller peak (proven)"


def _proof(err: remat.BudgetUnreachableError) -> tuple[int, int]:
    """(smallest reachable peak, proven lower bound of every valid plan's peak)
    from a fast/exact unreachable error."""
    text = str(err)
    smallest = _SMALLEST.search(text)
    assert smallest, f"no smallest reachable peak in: {text}"
    peak = int(smallest.group(1))
    if _NONE_SMALLER in text:
        return peak, peak
    below = _BELOW.search(text)
    assert below, f"no proven bound in: {text}"
    return peak, int(below.group(1))


@functools.lru_cache(maxsize=None)
def _bounds(name: str) -> tuple[int, int, int]:
    """(runtime-optimized peak, smallest reachable peak, proven bound), the
    last two from exact's error at a limit of 1 byte."""
    top = _plan(name, "torch_plans", 0).result["memory"]["peak_bytes"]
    err = _plan(name, "exact", 1)
    assert isinstance(err, remat.BudgetUnreachableError), f"{name}: a 1-byte limit was met"
    smallest, bound = _proof(err)
    assert bound <= smallest <= top, f"{name}: bound {bound}, smallest {smallest}, runtime-optimized {top}"
    return top, smallest, bound


def _room(name: str) -> tuple[int, int, int]:
    """_bounds, skipping a graph whose smallest reachable peak is its
    runtime-optimized one under this release (sac_transformer_block_inductor
    under 2.15): no limit changes its plan. test_most_listed_graphs_leave_room
    keeps the list from emptying."""
    top, smallest, bound = _bounds(name)
    if smallest == top:
        pytest.skip(f"{name}: under torch {torch.__version__} every plan's peak is at least the "
                    f"runtime-optimized one ({top} bytes)")
    return top, smallest, bound


def _limits(name: str) -> list[int]:
    top, smallest, _ = _room(name)
    return sorted({smallest, smallest + (top - smallest) // 2, top - 1})


def _runtime(p) -> float:
    return p.result["recompute_runtime"]


def _fits(p) -> bool:
    return not isinstance(p, remat.BudgetUnreachableError)


@pytest.mark.one_release
def test_most_listed_graphs_leave_room(rt):
    # The premise of the rules: a limit below the runtime-optimized peak is
    # reachable. Releases partition some graphs differently; most keep it.
    roomy = [n for n in CASES if _bounds(n)[1] < _bounds(n)[0]]
    assert len(roomy) >= len(CASES) - 2, f"only {roomy} of {CASES} leave the searches room"


@pytest.mark.one_release
@pytest.mark.parametrize("name", CASES)
def test_every_plan_fits_and_the_tracker_measures_the_simulated_peak(name, rt):
    cap = _graph(name)
    for search in ("fast", "exact"):
        for limit in _limits(name):
            p = _plan(name, search, limit)
            where = f"{cap.label}, {search} at {limit} bytes"
            if not _fits(p):
                continue  # reachability: the rules below
            peak = p.result["memory"]["peak_bytes"]
            assert peak <= limit, f"{where}: simulated peak {peak} over the limit"
            assert p.result["hazards"] == [], f"{where}: hazards {p.result['hazards']}"
            assert p.peak_search["search"] == search, where
            measured = measure_step(p.forward, p.backward, cap.num_fwd_outputs)
            assert measured.peak == peak, (
                f"{where}: simulated {peak} bytes at {p.result['memory']['peak_at']}, "
                f"measured {measured.peak} at {measured.peak_at}")


@pytest.mark.one_release
@pytest.mark.parametrize("name", EXACT_CASES)
def test_exact_is_never_worse_than_torch_plans_or_fast(name, rt):
    for limit in _limits(name):
        exact = _plan(name, "exact", limit)
        for other in ("torch_plans", "fast"):
            p = _plan(name, other, limit)
            if not _fits(p):
                continue
            where = f"{name} at {limit} bytes"
            assert _fits(exact), f"{where}: {other} found a plan, exact did not: {exact}"
            assert _runtime(exact) <= _runtime(p) * (1 + REL), (
                f"{where}: exact recomputes {_runtime(exact)}, {other} {_runtime(p)} "
                f"(exact optimal={exact.peak_search['optimal']}, "
                f"bound={exact.peak_search['recompute_lower_bound']})")


@pytest.mark.one_release
@pytest.mark.parametrize("name", EXACT_CASES)
def test_fast_is_within_five_percent_of_exact(name, rt):
    gaps = []
    for limit in _limits(name):
        exact = _plan(name, "exact", limit)
        if not _fits(exact):
            continue
        where = f"{name} at {limit} bytes"
        fast = _plan(name, "fast", limit)
        assert _fits(fast), (
            f"{where}: exact found a plan (peak {exact.result['memory']['peak_bytes']}), fast: {fast}")
        if not exact.peak_search["optimal"]:
            continue
        # Estimator units: a pointwise op costs 1. The absolute slack of one
        # such op covers optima near zero, where 5 % is less than any two
        # plans can differ by.
        if _runtime(fast) > 1.05 * _runtime(exact) + 1:
            gaps.append(f"{where}: fast recomputes {_runtime(fast)}, the optimum is {_runtime(exact)}")
    assert not gaps, gaps


@pytest.mark.one_release
@pytest.mark.parametrize("name", PROVEN_CASES)
def test_exact_proves_the_optimum_at_every_limit(name, rt):
    for limit in _limits(name):
        exact = _plan(name, "exact", limit)
        assert _fits(exact), f"{name} at {limit} bytes: {exact}"
        assert exact.peak_search["optimal"], f"{name} at {limit} bytes: {exact.peak_search}"


@pytest.mark.one_release
@pytest.mark.parametrize("name", CASES)
def test_the_unreachable_error_names_a_proven_smallest_peak(name, rt):
    top, smallest, bound = _room(name)
    if name in EXACT_CASES:
        # A limit of exactly the named peak is met (SLOW_CASES: exact's 2 s
        # may not get there again, so only the proof is checked there).
        p = _plan(name, "exact", smallest)
        assert _fits(p), f"{name}: the named smallest peak {smallest} is not reachable: {p}"
        assert p.result["memory"]["peak_bytes"] == smallest, name
    # No plan any search found, at any limit, undercuts the proof.
    for search in ("torch_plans", "fast", "exact"):
        for limit in (0, *_limits(name)):
            q = _plan(name, search, limit)
            if _fits(q):
                peak = q.result["memory"]["peak_bytes"]
                assert peak >= bound, f"{name}: {search} at {limit} has peak {peak} < proven {bound}"
        err = _plan(name, search, 1)
        assert isinstance(err, remat.BudgetUnreachableError), name
        found = int(_SMALLEST.search(str(err)).group(1))
        assert found >= bound, f"{name}: {search} reached {found} < proven {bound}"
        # The message's numbers are the exception's fields.
        assert err.smallest_peak == found, name
        assert err.proven_bound == (None if search == "torch_plans" else _proof(err)[1]), name
        if search != "torch_plans":
            # Each proof bounds every plan's peak, exact's reachable one too.
            assert _proof(err)[1] <= smallest, f"{name}: {search} proves {_proof(err)[1]} > reachable {smallest}"
        if search != "torch_plans" and name in EXACT_CASES:
            # The peak named is no larger than one the same search reaches
            # at a higher limit (fast aimed at 1 byte once named
            # mlp_gelu_d6's 1003.3 KiB, yet returned 908.0 KiB at 0.933 MiB).
            # Not on SLOW_CASES: there the 2 s limit cuts the smallest-peak
            # search short, so what it names depends on the machine's speed
            # (cross_entropy_inductor under torch 2.14 on a loaded CI run).
            for limit in _limits(name):
                q = _plan(name, search, limit)
                if _fits(q):
                    peak = q.result["memory"]["peak_bytes"]
                    assert found <= peak, f"{name}: {search} names {found} but reaches {peak} at {limit}"


@pytest.mark.one_release
@pytest.mark.parametrize("name", EXACT_CASES)
def test_a_proven_recompute_bound_is_never_above_a_plan_found(name, rt):
    for limit in _limits(name):
        plans = {s: _plan(name, s, limit) for s in SEARCHES}
        found = {s: _runtime(p) for s, p in plans.items() if _fits(p)}
        for search in ("fast", "exact"):
            p = plans[search]
            if not _fits(p) or p.peak_search["recompute_lower_bound"] is None:
                continue
            bound = p.peak_search["recompute_lower_bound"]
            for other, runtime in found.items():
                assert bound <= runtime * (1 + REL), (
                    f"{name} at {limit} bytes: {search} proves no plan recomputes less than "
                    f"{bound}, {other}'s recomputes {runtime}")
            if p.peak_search["optimal"]:
                # Optimal: the bound is the plan's recompute, less the MILP's
                # tie-break (fewer saved bytes, worth under 0.5 of a unit).
                assert _runtime(p) - bound <= 1e-3 * max(1.0, _runtime(p)), f"{name} at {limit} bytes: {p.peak_search}"


@pytest.mark.one_release
def test_a_compiled_model_trains_as_eager_under_exact(rt, monkeypatch):
    """The drop-in reads the search at compile time; exact's plan computes what eager does."""
    from corpus.capture import compile_case, loss_of, make_backend
    from corpus.models import CASES_BY_NAME

    case = CASES_BY_NAME["cnn_bn_maxpool"]
    _, smallest, _ = _room(case.name)
    searched = []
    engine = remat.partition

    def spy(*args, **kwargs):
        result = engine(*args, **kwargs)
        searched.append((result.get("peak_search"), result["memory"]["peak_bytes"]))
        return result

    monkeypatch.setattr(remat, "partition", spy)
    results = {}
    for mode in ("eager", "exact"):
        model, inputs = case.make_module(), case.make_inputs()
        fn = model
        if mode == "exact":
            fn = compile_case(case, model, make_backend(case, rt.min_cut_rematerialization_partition), inputs)
        with rt.peak_memory_budget(smallest, search="exact"):
            loss = loss_of(fn(*inputs))
            loss.backward()
        torch._dynamo.reset()
        results[mode] = [loss.detach()] + [p.grad for p in model.parameters()]
    assert searched and all(s is not None and s["search"] == "exact" and peak <= smallest
                            for s, peak in searched), searched
    for a, b in zip(results["eager"], results["exact"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs, argument", [
    ({"search": "greedy"}, "search"),
    ({"search": None}, "search"),
    ({"search": "Exact"}, "search"),
    ({"seconds": 0}, "seconds"),
    ({"seconds": -1.5}, "seconds"),
    ({"seconds": float("inf")}, "seconds"),
    ({"seconds": float("nan")}, "seconds"),
    ({"seconds": True}, "seconds"),
    ({"seconds": "60"}, "seconds"),
    ({"nodes": 0}, "nodes"),
    ({"nodes": -3}, "nodes"),
    ({"nodes": 1.5}, "nodes"),
    ({"nodes": True}, "nodes"),
    ({"nodes": "9"}, "nodes"),
])
def test_bad_search_options_raise_invalid_option_error_naming_the_argument(rt, kwargs, argument):
    with pytest.raises(remat.InvalidOptionError, match=rf"\b{argument}\b"):
        rt.set_peak_memory_budget(1 << 20, **kwargs)
    with pytest.raises(remat.InvalidOptionError, match=rf"\b{argument}\b"):
        with rt.peak_memory_budget(1 << 20, **kwargs):
            pass
    assert rt.get_peak_memory_budget() == 0 and rt.get_peak_search() == ("fast", None, None)


def test_a_bare_limit_searches_fast_and_the_drop_in_passes_the_search_only_with_a_limit(rt):
    try:
        assert "peak_search" not in rt.options_from_torch()
        rt.set_peak_memory_budget(4096, "torch_plans", 5)
        assert rt.get_peak_memory_budget() == 4096 and rt.get_peak_search() == ("torch_plans", 5.0, None)
        opts = rt.options_from_torch()
        assert (opts["peak_search"], opts["peak_search_seconds"]) == ("torch_plans", 5.0)
        assert "peak_search_nodes" not in opts  # the engine sizes it to the program
        with rt.peak_memory_budget(4096, "exact", nodes=50):
            opts = rt.options_from_torch()
            # No time limit unless asked for: the plan must not depend on the machine.
            assert opts["peak_search_nodes"] == 50 and "peak_search_seconds" not in opts
        with rt.peak_memory_budget(2048):
            assert rt.get_peak_memory_budget() == 2048
            assert rt.get_peak_search() == ("fast", None, None)
            assert rt.options_from_torch()["peak_search"] == "fast"
            with rt.peak_memory_budget(None, search="exact"):
                assert rt.get_peak_memory_budget() == 0
                assert "peak_search" not in rt.options_from_torch()
        assert rt.get_peak_search() == ("torch_plans", 5.0, None)
    finally:
        rt.set_peak_memory_budget(None)
    assert rt.get_peak_memory_budget() == 0 and rt.get_peak_search() == ("fast", None, None)


@functools.lru_cache(maxsize=None)
def _unet():
    from corpus import models
    from corpus.capture import capture_case

    (cap,) = capture_case(models.unet_case(2))
    return cap


def _bare(cap, limit: int, **setting):
    """(recompute, peak) of the drop-in's plan for `cap` inside
    ``peak_memory_budget(limit, **setting)``, or (None, the smallest
    reachable peak)."""
    import remat.torch as rt

    with rt.peak_memory_budget(limit, **setting):
        options = rt.options_from_torch()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p = rt.partition(cap.fresh_joint(), options=options, **cap.partition_kwargs())
        except remat.BudgetUnreachableError as e:
            return None, e.smallest_peak
    return p.result["recompute_runtime"], p.result["memory"]["peak_bytes"]


@pytest.mark.one_release
def test_a_bare_limit_gets_the_optimizers_plan_not_only_torchs(rt):
    """Issue 35: a limit alone searches every valid plan (fast). On a
    two-level U-Net, at the smallest peak torch's plans reach, it makes
    fast's plan, which recomputes half what torch's plans do (73730 against
    147474 under torch 2.13); its smallest reachable peak is fast's."""
    cap = _unet()
    _, smallest = _bare(cap, 1)
    _, torch_smallest = _bare(cap, 1, search="torch_plans")
    assert smallest == _bare(cap, 1, search="fast")[1] <= torch_smallest
    bare = _bare(cap, torch_smallest)
    assert bare == _bare(cap, torch_smallest, search="fast")
    torch_plan = _bare(cap, torch_smallest, search="torch_plans")
    assert bare[0] < torch_plan[0], (bare, torch_plan)


def test_the_result_carries_the_search_summary_only_under_a_limit(rt):
    name = "cnn_bn_maxpool"
    assert _plan(name, "torch_plans", 0).peak_search is None
    _, smallest, _ = _room(name)
    p = _plan(name, "exact", smallest)
    summary = p.peak_search
    assert summary is p.result["peak_search"]
    assert set(summary) == {"search", "plans_built", "cuts", "solver_rounds", "recompute_lower_bound",
                            "optimal", "solver_nodes", "stopped_by", "seconds"}
    assert summary["search"] == "exact" and summary["plans_built"] >= 1
    if summary["optimal"]:  # up to the MILP's tie-break, under 0.5
        assert 0 <= p.result["recompute_runtime"] - summary["recompute_lower_bound"] <= 1e-3 * max(1.0, p.result["recompute_runtime"])


@pytest.mark.one_release
def test_fast_checkpoints_a_deep_stack_and_its_plan_trains_as_eager(rt, monkeypatch):
    """Every torch plan keeps each layer's activations, so on a deep residual
    stack (a space past 2000 vars: optimize.h's large spaces) torch's smallest
    peak is its runtime-optimized one; fast's checkpointed plans reach far
    below. Halfway between the two, fast's plan fits, the live-storage tracker
    measures exactly its simulated peak, and the model compiled under it
    trains as eager does. (remat's own search on one release's graph: the
    parity of each release's partitioner is the other suites'.)"""
    from torch import nn

    from corpus.capture import compile_case, copy_graph_module, loss_of, make_backend
    from corpus.models import Case

    class Deep(nn.Module):
        def __init__(self, layers: int, dim: int):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                x = x + torch.relu(layer(x))
            return x

    def make():
        torch.manual_seed(0)
        return Deep(300, 32)

    case = Case("deep_residual_stack", make, lambda: (torch.randn(256, 32, generator=torch.Generator().manual_seed(1)),))
    results, probes, plans = [], {}, []
    engine = remat.partition

    def spy(*args, **kwargs):
        result = engine(*args, **kwargs)
        results.append(result)
        return result

    def smallest(joint, kwargs, search):
        options = rt.options_from_torch(peak_memory_budget=1, peak_search=search)
        with pytest.raises(remat.BudgetUnreachableError) as e:
            rt.partition(copy_graph_module(joint), options=options, **kwargs)
        return e.value

    def partition_fn(joint_module, joint_inputs, **kwargs):
        keys = {k: kwargs[k] for k in ("num_fwd_outputs", "static_lifetime_input_indices") if k in kwargs}
        probes["torch_plans"] = smallest(joint_module, keys, "torch_plans").smallest_peak
        fast = smallest(joint_module, keys, "fast")
        probes["fast"], probes["bound"] = fast.smallest_peak, fast.proven_bound
        probes["limit"] = (probes["torch_plans"] + probes["fast"]) // 2
        with rt.peak_memory_budget(probes["limit"], search="fast"):
            fw, bw = rt.min_cut_rematerialization_partition(joint_module, joint_inputs, **kwargs)
        plans.append((fw, bw, kwargs["num_fwd_outputs"], results[-1]))
        return fw, bw

    monkeypatch.setattr(remat, "partition", spy)
    grads = {}
    for mode in ("eager", "fast"):
        model, inputs = case.make_module(), case.make_inputs()
        fn = model if mode == "eager" else compile_case(case, model, make_backend(case, partition_fn), inputs)
        loss = loss_of(fn(*inputs))
        loss.backward()
        torch._dynamo.reset()
        grads[mode] = [loss.detach()] + [p.grad for p in model.parameters()]
    assert len(plans) == 1, f"{len(plans)} joint graphs"
    fw, bw, num_fwd_outputs, result = plans[0]
    assert probes["fast"] < probes["torch_plans"] / 2, probes
    assert 0 < probes["bound"] <= probes["fast"], probes
    peak = result["memory"]["peak_bytes"]
    assert result["peak_search"]["search"] == "fast" and peak <= probes["limit"], (result["peak_search"], peak, probes)
    assert result["hazards"] == []
    assert measure_step(fw, bw, num_fwd_outputs).peak == peak
    for a, b in zip(grads["eager"], grads["fast"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
