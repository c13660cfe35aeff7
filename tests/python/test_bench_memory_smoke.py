"""Keeps the memory benchmark working: bench/bench_memory.py --smoke. It
asserts the figure's plans are simulated exactly and remat's peak budget is
monotone on them; costs are measured by running the benchmark, never here."""

from __future__ import annotations

import pytest

pytest.importorskip("remat.torch")

from benches import bench_module  # noqa: E402


@pytest.mark.one_release
def test_memory_benchmark_smoke_run(capsys):
    bench_memory = bench_module("bench_memory")
    assert bench_memory.main(["--smoke", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "| residual_mlp |" in out and "| NO |" not in out
    assert "figure: remat's peak budget is monotone | yes | met" in out
    assert "| transformer_4 |" in out
    svg = bench_memory.figure_svg([{"model": "m", "nodes": 3,
                                    "torch": [{"budget": 1.0, "peak": 2**20, "runtime": 1},
                                              {"budget": 0.5, "peak": 2**21, "runtime": 5}],
                                    "remat": [{"limit": 2**20, "peak": 2**20, "runtime": 1}]}])
    assert svg.startswith("<svg") and svg.count('stroke="#d00000"') >= 2  # the rise, and its legend
