"""torch's custom memory-budget solver and runtime estimator, run by remat.

With ``torch._functorch.config.activation_memory_budget_solver`` a
``CustomKnapsackSolver`` and/or ``activation_memory_budget_runtime_estimator``
a ``CustomRuntimeEstimator``, remat's drop-in must call them as torch does and
return torch's partition. On joint graphs captured from torch (``corpus``),
torch's ``min_cut_rematerialization_partition`` and remat's run on fresh
copies under the same config patch, and:

* the forward and backward graphs (``format_node`` of every node) and saved
  values are the same;
* the callables saw the same arguments: the memory list, max_memory, the
  banned nodes (names, users, ``dist_from_bw``, recompute tags), the joint
  graph (node names) and the NodeInfo (required forward/backward nodes,
  inputs), and for the estimator the same nodes in the same order;
* negative and out-of-range recomputed indices are treated as torch treats
  them;
* an exception raised inside either callable surfaces from remat unchanged.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch._functorch._activation_checkpointing.knapsack import greedy_knapsack
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._inductor.custom_graph_pass import CustomKnapsackSolver, CustomRuntimeEstimator

import parity
from corpus import captured_graphs, run_partition

CASES = ["mlp_gelu_d3", "transformer_block", "cnn_bn_maxpool", "checkpoint_mlp", "dropout_mlp"]
BUDGETS = [0.1, 0.5]


@pytest.fixture(scope="module")
def remat_torch():
    return pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")


def _node_facts(n: torch.fx.Node) -> tuple:
    return (n.name, sorted(u.name for u in n.users), getattr(n, "dist_from_bw", None),
            str(n.meta.get("recompute")))


class GreedySolver(CustomKnapsackSolver):
    """torch's greedy knapsack on node-derived runtimes; records its arguments."""

    def __init__(self, negative: bool = False, extra: tuple = ()) -> None:
        self.calls: list = []
        self.negative = negative  # return recomputed indices counted from the end
        self.extra = extra        # indices torch's lookup skips

    def __call__(self, memory, joint_graph, max_memory, node_info, all_recomputable_banned_nodes):
        nodes = all_recomputable_banned_nodes
        self.calls.append((
            list(memory), max_memory, [_node_facts(n) for n in nodes],
            [n.name for n in joint_graph.nodes],
            sorted(n.name for n in node_info.required_fw_nodes),
            sorted(n.name for n in node_info.required_bw_nodes),
            [n.name for n in node_info.inputs],
        ))
        runtimes = [float(len(n.users) + len(n.all_input_nodes)) for n in nodes]
        _, saved, recomputed = greedy_knapsack(memory, runtimes, max_memory)
        if self.negative:
            recomputed = [i - len(nodes) for i in recomputed]
        return saved, list(recomputed) + list(self.extra)

    def uuid(self):
        return None


class TargetEstimator(CustomRuntimeEstimator):
    """A constant per op target; records the nodes it prices."""

    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, node: torch.fx.Node) -> float:
        self.calls.append(_node_facts(node))
        return float(sum(map(ord, str(node.target))) % 13 + 1)

    def uuid(self):
        return None


class RaisingSolver(CustomKnapsackSolver):
    def __call__(self, *args):
        raise ValueError("solver says no")

    def uuid(self):
        return None


class RaisingEstimator(CustomRuntimeEstimator):
    def __call__(self, node):
        raise KeyError("estimator says no")

    def uuid(self):
        return None


def _lines(gm) -> list[str]:
    return [str(n.format_node()) for n in gm.graph.nodes]


def _run_both(cap, remat_fn, hooks, **config):
    """Runs torch, then remat, with fresh hooks from `hooks()`; returns (problems, torch's, remat's)."""
    theirs_hooks, ours_hooks = hooks(), hooks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = run_partition(min_cut_rematerialization_partition, cap,
                                 **config, **theirs_hooks)
    actual = run_partition(remat_fn, cap, **config, **ours_hooks)
    problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    for side, e, a in (("forward", expected[0], actual[0]), ("backward", expected[1], actual[1])):
        if _lines(e) != _lines(a):
            problems.append(f"{side} format_node lines differ")
    return problems, theirs_hooks, ours_hooks


def _check(remat_torch, hooks, **config):
    failures, calls = [], 0
    for case in CASES:
        for cap in captured_graphs(case):
            for budget in BUDGETS:
                problems, theirs, ours = _run_both(
                    cap, remat_torch.min_cut_rematerialization_partition, hooks,
                    activation_memory_budget=budget, **config)
                for key, obj in theirs.items():
                    if obj.calls != ours[key].calls:
                        problems.append(f"{key} was called differently:\n  torch: {obj.calls}\n"
                                        f"  remat: {ours[key].calls}")
                    calls += len(obj.calls)
                if problems:
                    failures.append(f"{cap.label} budget={budget}:\n" + "\n".join(problems))
    assert not failures, "\n\n".join(failures)
    return calls


def test_custom_solver_parity(remat_torch):
    calls = _check(remat_torch, lambda: {"activation_memory_budget_solver": GreedySolver()})
    assert calls >= 4, "the cases must reach the knapsack"


def test_custom_solver_index_lookup_parity(remat_torch):
    # Negative indices count from the end; out-of-range and non-int ones are skipped.
    calls = _check(remat_torch, lambda: {
        "activation_memory_budget_solver": GreedySolver(negative=True, extra=(10**6, -10**6, "x"))})
    assert calls >= 4


@pytest.mark.parametrize("solver", ["greedy", "dp"])
def test_custom_estimator_parity(remat_torch, solver):
    calls = _check(remat_torch, lambda: {
        "activation_memory_budget_runtime_estimator": TargetEstimator()},
        activation_memory_budget_solver=solver)
    assert calls >= 4


def test_custom_solver_and_estimator_together(remat_torch):
    calls = _check(remat_torch, lambda: {
        "activation_memory_budget_solver": GreedySolver(),
        "activation_memory_budget_runtime_estimator": TargetEstimator()})
    assert calls >= 4


@pytest.mark.parametrize("hooks, error, message", [
    ({"activation_memory_budget_solver": RaisingSolver()}, ValueError, "solver says no"),
    ({"activation_memory_budget_runtime_estimator": RaisingEstimator()}, KeyError,
     "estimator says no"),
])
def test_exceptions_surface_unchanged(remat_torch, hooks, error, message):
    cap = captured_graphs("mlp_gelu_d3")[0]
    config = dict(activation_memory_budget=0.1, **hooks)
    with pytest.raises(error, match=message):
        run_partition(min_cut_rematerialization_partition, cap, **config)
    with pytest.raises(error, match=message):
        run_partition(remat_torch.min_cut_rematerialization_partition, cap, **config)
    # The engine is still usable afterwards.
    run_partition(remat_torch.min_cut_rematerialization_partition, cap,
                  activation_memory_budget=0.1)


def test_plain_callable_solver(remat_torch):
    """remat also takes any callable with the solver's signature (torch wants the class)."""
    cap = captured_graphs("mlp_gelu_d3")[0]
    solver = GreedySolver()
    expected = run_partition(remat_torch.min_cut_rematerialization_partition, cap,
                             activation_memory_budget=0.1, activation_memory_budget_solver=solver)
    assert solver.calls
    plain = GreedySolver()
    actual = run_partition(remat_torch.min_cut_rematerialization_partition, cap,
                           activation_memory_budget=0.1,
                           activation_memory_budget_solver=lambda *a: plain(*a))
    assert plain.calls == solver.calls
    assert _lines(expected[0]) == _lines(actual[0]) and _lines(expected[1]) == _lines(actual[1])


def test_engine_hooks_directly(remat_torch):
    """remat.partition's own hooks: the C++ calling convention, joint ids."""
    import remat
    from remat.torch._fx_to_json import export_joint_graph

    cap = captured_graphs("mlp_gelu_d3")[0]
    joint = cap.fresh_joint()
    names = [n.name for n in joint.graph.nodes]
    doc = export_joint_graph(joint, cap.num_fwd_outputs, as_json=True)
    seen = {}

    def solver(memory, max_memory, banned):
        seen["solver"] = (list(memory), max_memory, [names[i] for i in banned])
        return [], list(range(len(banned)))

    def estimator(joint_id):
        seen.setdefault("estimator", []).append(names[joint_id])
        return 2

    opts = {"activation_memory_budget": 0.1}
    remat.partition(doc, opts, knapsack_solver=solver, runtime_estimator=estimator)
    assert seen["solver"][2] == seen["estimator"]
    assert seen["solver"][1] == 0.1 and len(seen["solver"][0]) == len(seen["estimator"])
    # A wrong return type is an InvalidOptionError, not a crash.
    with pytest.raises(remat.InvalidOptionError, match="custom knapsack solver returned"):
        remat.partition(doc, opts, knapsack_solver=lambda *a: 42)
    with pytest.raises(remat.InvalidOptionError, match="custom runtime estimator returned"):
        remat.partition(doc, opts, runtime_estimator=lambda i: "slow")
    # "custom" without a hook names what is missing.
    with pytest.raises(remat.InvalidOptionError, match="custom_knapsack"):
        remat.partition(doc, {**opts, "activation_memory_budget_solver": "custom"})


def test_solver_sees_torch_prepared_graph(remat_torch):
    """Dead code and duplicates in the joint graph: the callables see the graph
    after DCE and CSE (users, node names), as torch's do."""
    from corpus import replay_context

    cap = captured_graphs("mlp_gelu_d3")[0]

    def doctored():
        joint = cap.fresh_joint()
        g = joint.graph
        first = next(n for n in g.nodes if n.target == torch.ops.aten.addmm.default)
        with g.inserting_after(first):
            dup = g.call_function(first.target, first.args, first.kwargs)
            dup.meta = dict(first.meta)
        # Half of the users move to the duplicate, which CSE folds back.
        for user in list(first.users)[:1]:
            if user is not dup:
                user.replace_input_with(first, dup)
        with g.inserting_after(dup):
            dead = g.call_function(torch.ops.aten.cos.default, (dup,))
            dead.meta = dict(first.meta)
        joint.recompile()
        injected.update((dup.name, dead.name))
        return joint

    injected: set = set()
    results, solvers = [], []
    for fn in (min_cut_rematerialization_partition, remat_torch.min_cut_rematerialization_partition):
        solver = GreedySolver()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with replay_context(cap, activation_memory_budget=0.1,
                                activation_memory_budget_solver=solver):
                results.append(fn(doctored(), cap.joint_inputs, **cap.partition_kwargs()))
        solvers.append(solver)
    assert solvers[0].calls, "the knapsack must be reached"
    assert solvers[0].calls == solvers[1].calls
    assert len(injected) == 2 and not injected & set(solvers[0].calls[0][3])
    assert not parity.partition_diffs(results[0], results[1], cap.num_fwd_outputs)
    assert [_lines(gm) for gm in results[0]] == [_lines(gm) for gm in results[1]]


def test_profile_estimator_times_ops_in_python(remat_torch, monkeypatch):
    """runtime_estimator="profile": the Python side times each knapsack item's
    op (torch itself can only do that on a GPU) and the engine uses the times."""
    from remat.torch import _custom

    timed = []
    real = _custom._profile_estimator

    def spy(node):
        ms = real(node)
        assert ms >= 0.0
        timed.append(node.name)
        return ms

    monkeypatch.setattr(_custom, "_profile_estimator", spy)
    cap = captured_graphs("mlp_gelu_d3")[0]
    fw, bw = run_partition(remat_torch.min_cut_rematerialization_partition, cap,
                           activation_memory_budget=0.1,
                           activation_memory_budget_runtime_estimator="profile")
    assert timed, "the knapsack items must have been timed"
    assert len(timed) == len(set(timed))  # once per item, as torch
    assert any(n.op == "output" for n in fw.graph.nodes)
