"""Parity of the activation memory budget with torch 2.13, computed live.

On joint graphs captured from torch (``corpus``: MLPs, a transformer block
with SDPA, CNNs with batchnorm, checkpointed regions), at budgets
{0, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0}:

* solvers ``dp`` and ``greedy``: torch's ``min_cut_rematerialization_partition``
  and remat's, on independent copies under the same config patch, return the
  same forward and backward graphs (``format_node`` of every node) and the
  same saved values;
* solver ``ilp``: where torch reaches its knapsack, the knapsack inputs it
  builds are recorded; remat's optimum at that budget (``remat.pareto`` with
  ``budgets=[b]``) equals scipy milp's exact optimum on those inputs (torch's
  own ilp stops at HiGHS' 1e-4 gap, and ties may pick other sets);
* region budgets (``node.meta["custom"]`` as
  ``torch.autograd.graph.region_activation_memory_budget`` writes them): the
  same partition, and the same errors for conflicting or partial annotations;
* ``remat pareto`` writes an SVG chart for a shipped example.

Nothing torch computes is stored: expectations come from calling torch here.
"""

from __future__ import annotations

import math
import subprocess
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from torch._functorch import partitioners as tp
from torch._functorch.partitioners import min_cut_rematerialization_partition

import parity
from corpus import captured_graphs, run_partition
from corpus.capture import replay_context

REPO = Path(__file__).resolve().parents[2]
BUDGETS = [0.0, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0]
CASES = [
    "mlp_gelu_d3",
    "mlp_relu_d6",
    "mlp_gelu_d3_inductor",
    "sdpa",
    "transformer_block",
    "transformer_block_inductor",
    "cnn_bn_maxpool",
    "cnn_bn_avgpool_inductor",
    "resnet_basic_block",
    "checkpoint_mlp",
    "checkpoint_transformer_block",
    "sac_save_mm",
    "dropout_mlp",
]
REGION_KEY = "_region_activation_memory_budget"


@pytest.fixture(scope="module")
def remat_torch():
    return pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")


class _KnapsackRecorder:
    """Wraps torch's _optimize_runtime_with_given_memory to see its inputs."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[list[float], list[float], float, tuple]] = []
        original = tp._optimize_runtime_with_given_memory

        def recording(joint_graph, memory, runtimes, max_memory, *rest):
            out = original(joint_graph, memory, runtimes, max_memory, *rest)
            self.calls.append((list(memory), list(runtimes), max_memory, out))
            return out

        monkeypatch.setattr(tp, "_optimize_runtime_with_given_memory", recording)


def _lines(gm) -> list[str]:
    return [str(n.format_node()) for n in gm.graph.nodes]


def _compare(cap, remat_fn, **config):
    """Runs torch then remat on fresh copies; returns a problem string or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = run_partition(min_cut_rematerialization_partition, cap, **config)
    except Exception as torch_error:  # torch rejects the graph: remat must too
        try:
            run_partition(remat_fn, cap, **config)
        except Exception:
            return None
        return f"torch raised {torch_error!r}, remat did not"
    actual = run_partition(remat_fn, cap, **config)
    problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    for side, e, a in (("forward", expected[0], actual[0]), ("backward", expected[1], actual[1])):
        if _lines(e) != _lines(a):
            problems.append(f"{side} format_node lines differ")
    return "\n".join(problems) if problems else None


@pytest.mark.parametrize("solver", ["dp", "greedy"])
@pytest.mark.parametrize("case_name", CASES)
def test_budget_partition_parity(case_name, solver, remat_torch, monkeypatch):
    rec = _KnapsackRecorder(monkeypatch)
    failures = []
    for cap in captured_graphs(case_name):
        for budget in BUDGETS:
            problem = _compare(
                cap,
                remat_torch.min_cut_rematerialization_partition,
                activation_memory_budget=budget,
                activation_memory_budget_solver=solver,
            )
            if problem:
                failures.append(f"{cap.label} budget={budget} solver={solver}:\n{problem}")
    assert not failures, "\n\n".join(failures)
    # Record for test_knapsack_stage_was_exercised.
    _KNAPSACK_CALLS[(case_name, solver)] = len(rec.calls)


_KNAPSACK_CALLS: dict[tuple[str, str], int] = {}


def test_knapsack_stage_was_exercised():
    """The cases above must reach torch's knapsack, or the parity says little."""
    if not _KNAPSACK_CALLS:
        pytest.skip("run together with test_budget_partition_parity")
    reached = sorted(case for (case, _), n in _KNAPSACK_CALLS.items() if n)
    assert len(set(reached)) >= 4, _KNAPSACK_CALLS


def _milp_optimum(memory, runtimes, max_memory) -> float:
    """max sum(runtime * x) s.t. sum(memory * x) <= max_memory, x binary; no gap."""
    np = pytest.importorskip("numpy")
    opt = pytest.importorskip("scipy.optimize")
    n = len(memory)
    res = opt.milp(
        c=-np.asarray(runtimes, dtype=float),
        constraints=[opt.LinearConstraint(np.asarray([memory], dtype=float), -np.inf, max_memory)],
        integrality=np.ones(n),
        bounds=opt.Bounds(0, 1),
        options={"mip_rel_gap": 0.0},
    )
    assert res.success, res.message
    return float(-res.fun)


ILP_CASES = ["transformer_block", "cnn_bn_maxpool", "mlp_relu_d6", "resnet_basic_block",
             "mlp_gelu_d3", "sdpa", "checkpoint_mlp", "dropout_mlp"]


@pytest.mark.parametrize("case_name", ILP_CASES)
def test_ilp_objective_is_the_milp_optimum(case_name, remat_torch, monkeypatch):
    """The ilp solver's deliberate difference (README, remat.torch's docs):
    remat's knapsack keeps the exact optimum, so it never keeps less runtime
    than torch's own choice (HiGHS within its 1e-4 gap), computed here."""
    import remat

    rec = _KnapsackRecorder(monkeypatch)
    checked = 0
    for cap in captured_graphs(case_name):
        for budget in BUDGETS[1:-1]:
            config = dict(activation_memory_budget=budget, activation_memory_budget_solver="ilp")
            rec.calls.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_partition(min_cut_rematerialization_partition, cap, **config)
            if not rec.calls:
                # An earlier tier met the budget: the graphs must simply agree.
                assert _compare(cap, remat_torch.min_cut_rematerialization_partition, **config) is None
                continue
            memory, runtimes, max_memory, torch_choice = rec.calls[-1]
            best = _milp_optimum(memory, runtimes, max_memory)
            joint = cap.fresh_joint()
            with replay_context(cap, **config):
                doc = remat_torch.export_joint_graph(
                    joint, cap.num_fwd_outputs, cap.static_lifetime_input_indices, as_json=True
                )
                options = remat_torch.options_from_torch()
            [(b, recomputed, _ratio)] = remat.pareto(doc, options, budgets=[budget])
            ours = math.fsum(runtimes) - recomputed
            assert b == budget
            assert ours == pytest.approx(best, rel=1e-9, abs=1e-6), (cap.label, budget)
            theirs = torch_choice[0]  # the runtime torch's milp choice keeps
            assert ours >= theirs - 1e-9 * max(1.0, abs(theirs)), (cap.label, budget, ours, theirs)
            checked += 1
    if checked == 0:
        pytest.skip(f"{case_name}: no budget reached the knapsack")


# --------------------------------------------------------------------------- region budgets


def _annotate(gm, budget, *, skip=()):
    for node in gm.graph.nodes:
        if node.name in skip:
            continue
        node.meta["custom"] = {**(node.meta.get("custom") or {}), REGION_KEY: budget}


def _region_partitions(cap, remat_fn, annotate):
    results = []
    for fn in (min_cut_rematerialization_partition, remat_fn):
        joint = cap.fresh_joint()
        # fresh_joint shares meta dicts with the pristine module: copy them.
        for node in joint.graph.nodes:
            node.meta = dict(node.meta)
        annotate(joint)
        with replay_context(cap, activation_memory_budget=1.0):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    results.append(fn(joint, cap.joint_inputs, **cap.partition_kwargs()))
            except Exception as e:  # noqa: BLE001 - compared below
                results.append(e)
    return results


@pytest.mark.parametrize("case_name", ["transformer_block", "cnn_bn_maxpool", "checkpoint_mlp"])
@pytest.mark.parametrize("budget", [0.0, 0.3, 1.0])
def test_region_budget_parity(case_name, budget, remat_torch):
    for cap in captured_graphs(case_name):
        expected, actual = _region_partitions(
            cap, remat_torch.min_cut_rematerialization_partition, lambda gm: _annotate(gm, budget)
        )
        assert not isinstance(expected, Exception), expected
        assert not isinstance(actual, Exception), actual
        assert parity.partition_diffs(expected, actual, cap.num_fwd_outputs) == []


def test_region_budget_errors_match(remat_torch):
    import remat
    from remat.torch import _release

    cap = captured_graphs("transformer_block")[0]
    fw_ops = [
        n.name
        for n in cap.joint_module.graph.nodes
        if n.op == "call_function" and n.name.startswith(("mm", "addmm", "relu", "gelu", "view"))
    ]

    def conflicting(gm):
        _annotate(gm, 0.5)
        next(n for n in gm.graph.nodes if n.op == "call_function").meta["custom"][REGION_KEY] = 0.25

    for annotate, needle in (
        (conflicting, "conflicting budgets within a single joint graph (including nested subgraphs): [0.25, 0.5]"),
        (lambda gm: _annotate(gm, 0.5, skip=set(fw_ops[:1])), "forward op(s) are unannotated"),
    ):
        expected, actual = _region_partitions(cap, remat_torch.min_cut_rematerialization_partition, annotate)
        if not _release.behaves("region_memory_budget"):
            # Before 2.13 torch reads no region annotation: both partition alike.
            assert parity.partition_diffs(expected, actual, cap.num_fwd_outputs) == []
            continue
        assert isinstance(expected, RuntimeError) and needle in str(expected), expected
        assert isinstance(actual, remat.RematError) and needle in str(actual), actual


# --------------------------------------------------------------------------- pareto


def test_pareto_cli_writes_svg(tmp_path):
    svg, csv = tmp_path / "frontier.svg", tmp_path / "frontier.csv"
    example = REPO / "examples" / "transformer_block.json"
    proc = subprocess.run(
        ["remat", "pareto", str(example), "-o", str(svg), "--csv", str(csv)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    circles = [e for e in root.iter() if e.tag.endswith("circle")]
    assert len(circles) >= 2
    rows = csv.read_text().splitlines()
    assert rows[0] == "budget,recompute_runtime,memory_ratio"
    assert len(rows) - 1 == len(circles)


def test_pareto_python_matches_cli_points():
    import remat

    doc = (REPO / "examples" / "transformer_block.json").read_bytes()
    points = remat.pareto(doc)
    assert points[0][0] == 0.0 and points[-1][0] == 1.0
    assert points == sorted(points)
    # Evaluating the sweep's own budgets one by one gives the same outcomes.
    again = remat.pareto(doc, budgets=[p[0] for p in points])
    assert again == points
