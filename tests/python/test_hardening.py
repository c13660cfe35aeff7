"""The Python front door under misuse: hooks returning odd values, arguments
of the wrong type, precisions no loop can reach, and what results carry.

Each test pins one rule from issue 12 (hardening); the C++ side of the same
rules is in tests/cpp/test_files.cc and tests/cpp/test_cli_safety.cc."""

from __future__ import annotations

from pathlib import Path

import pytest

remat = pytest.importorskip("remat")

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMER = (ROOT / "examples" / "transformer_block.json").read_bytes()
BUDGET = {"activation_memory_budget": 0.1}


def _saved(result: dict) -> list:
    return result["saved_values"]


def test_knapsack_indices_beyond_c_int_are_skipped_like_any_out_of_range_index():
    calls = []

    def solver(extra):
        def solve(memory, max_memory, banned):
            calls.append(len(banned))
            return [], [0, *extra]
        return solve

    plain = remat.partition(TRANSFORMER, BUDGET, as_json=False, knapsack_solver=solver([]))
    huge = remat.partition(TRANSFORMER, BUDGET, as_json=False,
                           knapsack_solver=solver([2**31, 2**63, 2**70, -2**40, 10**6]))
    assert calls and all(n > 0 for n in calls)  # the solver ran, with items
    assert _saved(huge) == _saved(plain)


@pytest.mark.parametrize("bad, where", [((["a"], [0]), "saved[0]"), (([], [0, 1.0]), "recomputed[1]"),
                                        (([], "01"), "recomputed"), (([],), "1 values")])
def test_knapsack_non_int_results_name_the_element(bad, where):
    with pytest.raises(remat.InvalidOptionError, match=r"custom knapsack solver returned .*" +
                       where.replace("[", r"\[").replace("]", r"\]")):
        remat.partition(TRANSFORMER, BUDGET, knapsack_solver=lambda *a: bad)


def test_pareto_terminates_whatever_the_resolution():
    coarse = remat.pareto(TRANSFORMER, resolution=1e-3)
    for resolution in (1e-16, 1e-300):
        fine = remat.pareto(TRANSFORMER, resolution=resolution)
        assert fine[0][0] == 0.0 and fine[-1][0] == 1.0
        assert len(fine) >= len(coarse)


def test_python_results_carry_timings():
    result = remat.partition(TRANSFORMER, as_json=False)
    assert result["seconds"] >= 0 and list(result["stages"])[0] == "prepare"


def test_num_fwd_outputs_must_be_an_int():
    torch = pytest.importorskip("torch")
    from remat.torch._fx_to_json import export_joint_graph

    gm = torch.fx.symbolic_trace(lambda x: (x.relu(),))
    assert export_joint_graph(gm, 1)["num_fwd_outputs"] == 1
    for bad in ("1", 1.0, None):
        with pytest.raises(TypeError, match="num_fwd_outputs must be an int, not"):
            export_joint_graph(gm, bad)
    with pytest.raises(TypeError, match="static_lifetime_input_indices must be an int"):
        export_joint_graph(gm, 1, ["0"])
