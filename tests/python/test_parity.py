"""Parity: remat's partitioners against torch's, live, on every captured joint graph.

For each case in the corpus (``corpus.models.CASES``) and each joint graph it
yields, torch's ``min_cut_rematerialization_partition`` / ``default_partition``
and remat's run on independent copies of the graph, in the context AOTAutograd
partitions in (``corpus.capture.replay_context``), and must agree exactly on
saved values, on the forward/backward graphs and on every node's ``meta``
(``parity.py``; the meta differences docs/torch-releases.md lists excepted).
Nothing torch can compute is stored: expectations come from calling torch in
the same session.

``test_replay_matches_compile_time`` needs no remat: it checks that a direct
call of torch's partitioner in the replay context reproduces what the same
partitioner returned during compilation, i.e. that the harness is sound.
The remat tests skip (via ``pytest.importorskip``) until ``remat.torch`` imports.
"""

from __future__ import annotations

import warnings

import pytest
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

import parity
from corpus import CASES, CASES_BY_NAME, captured_graphs, run_partition

CASE_NAMES = [case.name for case in CASES]

# variant id -> torch._functorch.config patch, applied around both partitioners
CONFIG_VARIANTS = {
    "recompute_views": {"recompute_views": True},
    "no_ban_reductions": {"ban_recompute_reductions": False},
    "aggressive": {"aggressive_recomputation": True},
    "params_not_free": {"treat_parameters_as_free_to_save": False},
    "no_cse": {"cse": False},
    "no_allowlist_ban": {"ban_recompute_not_in_allowlist": False},
    "memory_budget_0.5": {"activation_memory_budget": 0.5},
    "no_far_apart_ban": {"ban_recompute_used_far_apart": False},
    "no_long_chain_ban": {"ban_recompute_long_fusible_chains": False},
    "no_materialized_ban": {"ban_recompute_materialized_backward": False},
    "max_dist_3": {"max_dist_from_bw": 3},
    "non_builtin_included": {"is_non_builtin_to_include": True},
    "collectives_optimized": {"unsafe_allow_optimization_of_collectives": True},
}
CONFIG_CASES = [
    "mlp_gelu_d3_inductor",
    "transformer_block_inductor",
    "layernorm_mlp_inductor",
    "checkpoint_dropout",
    "sac_save_mm",
    "view_heavy",
    "duplicate_work_cse",
    "dynamic_layernorm",
]
CONFIG_PARAMS = [
    pytest.param(case, patch, id=f"{case}-{variant}")
    for case in CONFIG_CASES
    for variant, patch in CONFIG_VARIANTS.items()
]


@pytest.fixture(scope="session")
def remat_torch():
    return pytest.importorskip(
        "remat.torch", reason="remat.torch is not importable yet (C++ engine / Python adapter not built)"
    )


def _torch_then_remat(torch_fn, remat_fn, cap, **config):
    """Run torch's and remat's partitioner on independent copies; torch errors must be matched."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = run_partition(torch_fn, cap, **config)
    except Exception as torch_error:  # torch itself rejects this graph: remat must too
        with pytest.raises(Exception):
            run_partition(remat_fn, cap, **config)
        return None, torch_error
    actual = run_partition(remat_fn, cap, **config)
    return (expected, actual), None


def _check_all_graphs(case_name, torch_fn, remat_fn, **config):
    failures = []
    for cap in captured_graphs(case_name):
        results, _ = _torch_then_remat(torch_fn, remat_fn, cap, **config)
        if results is None:
            continue
        expected, actual = results
        problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
        if problems:
            failures.append(f"{cap.label}: partition mismatch\n" + "\n\n".join(problems))
            continue
        problems = parity.partition_meta_diffs(expected, actual)
        if problems:
            failures.append(f"{cap.label}: node meta differs\n" + "\n".join(problems))
    assert not failures, "\n\n".join(failures)


# --------------------------------------------------------------------------- harness soundness


def test_corpus_is_large_enough():
    assert len(CASES) >= 40
    assert len(CASES_BY_NAME) == len(CASES)


@pytest.mark.parametrize("case_name", CASE_NAMES)
def test_replay_matches_compile_time(case_name):
    for cap in captured_graphs(case_name):
        replayed = run_partition(min_cut_rematerialization_partition, cap)
        parity.assert_same_partition(
            (cap.compile_time_fw, cap.compile_time_bw), replayed, cap.num_fwd_outputs, cap.label
        )


def test_diff_reports_first_mismatch():
    cap = captured_graphs("mlp_gelu_d3")[0]
    expected = run_partition(min_cut_rematerialization_partition, cap)
    actual = run_partition(min_cut_rematerialization_partition, cap)
    assert parity.partition_diffs(expected, actual, cap.num_fwd_outputs) == []

    victim = next(n for n in actual[1].graph.nodes if n.op == "call_function")
    victim.args = tuple(reversed(victim.args)) if len(victim.args) > 1 else (*victim.args, 1)
    problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    assert problems[0] == "remat backward module's code is stale: its graph changed after the last recompile()"
    actual[1].recompile()
    problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    assert len(problems) == 1 and problems[0].startswith("backward graph differs at node #")
    assert "torch:" in problems[0] and "remat:" in problems[0] and "args" in problems[0]

    saved = parity.output_node(actual[0])
    saved.args = (tuple(saved.args[0][:-1]),)
    actual[0].recompile()
    problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    assert problems[0].startswith("saved values differ")
    assert problems[1].startswith("forward graph differs")


@pytest.mark.one_release
def test_meta_diff_compares_keys_plain_values_and_object_types():
    cap = captured_graphs("mlp_gelu_d3")[0]
    expected = run_partition(min_cut_rematerialization_partition, cap)
    actual = run_partition(min_cut_rematerialization_partition, cap)
    assert parity.partition_meta_diffs(expected, actual) == []

    exp = next(n for n in expected[0].graph.nodes if n.op == "call_function")
    act = next(n for n in actual[0].graph.nodes if n.op == "call_function")
    act.meta["remat_val"] = {"kind": "tensor"}
    exp.meta["count"], act.meta["count"] = 1, 1.0  # plain data: value and type
    exp.meta["thing"], act.meta["thing"] = object(), object()  # objects: type only
    act.meta["val"] = [act.meta["val"]]
    (problem,) = parity.node_meta_diffs(expected[0], actual[0], "forward")
    assert f"node {act.name!r}" in problem
    assert "'remat_val': only remat has it" in problem and "'count' differs" in problem
    assert "'val' differs" in problem and "'thing'" not in problem
    # A listed key is excused on the nodes it names only.
    listed = {"remat_val": {"call_function"}, "count": {"any"}, "val": {"placeholder"}}
    (problem,) = parity.node_meta_diffs(expected[0], actual[0], "forward", listed)
    assert "remat_val" not in problem and "count" not in problem and "'val' differs" in problem


@pytest.mark.one_release
def test_listed_meta_differences_read_the_releases_they_name():
    assert parity._release_matches("all", (2, 11))
    assert parity._release_matches("2.13 on", (2, 15)) and not parity._release_matches("2.13 on", (2, 12))
    assert parity._release_matches("2.11-2.12", (2, 12)) and not parity._release_matches("2.11-2.12", (2, 13))
    assert parity._release_matches("2.14", (2, 14)) and not parity._release_matches("2.14", (2, 15))
    for release in ((2, 11), (2, 13), (2, 15)):
        listed = parity.listed_meta_differences(release)
        assert all(ops and ops <= {"any", "placeholder", "call_function", "get_attr", "output"}
                   for ops in listed.values()), listed


# --------------------------------------------------------------------------- remat vs torch


@pytest.mark.parametrize("case_name", CASE_NAMES)
def test_min_cut_parity(case_name, remat_torch):
    _check_all_graphs(case_name, min_cut_rematerialization_partition, remat_torch.min_cut_rematerialization_partition)


@pytest.mark.parametrize("case_name", CASE_NAMES)
def test_default_partition_parity(case_name, remat_torch):
    _check_all_graphs(case_name, default_partition, remat_torch.default_partition)


@pytest.mark.parametrize("case_name,config", CONFIG_PARAMS)
def test_min_cut_config_variant_parity(case_name, config, remat_torch):
    _check_all_graphs(
        case_name, min_cut_rematerialization_partition, remat_torch.min_cut_rematerialization_partition, **config
    )
