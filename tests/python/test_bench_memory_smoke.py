"""Keeps the memory benchmark working: bench/bench_memory.py --smoke. It
asserts the figure's plans are simulated exactly and remat's peak budget is
monotone on them; costs are measured by running the benchmark, never here."""

from __future__ import annotations

import pytest

pytest.importorskip("remat.torch")

from benches import bench_module  # noqa: E402


@pytest.mark.one_release
def test_memory_benchmark_smoke_run(capsys, monkeypatch):
    bench_memory = bench_module("bench_memory")
    # Every command the benchmark runs under a peak limit names its search:
    # its rows are labelled by search, and a bare --peak-budget runs the
    # default (the torch_plans rows once measured fast that way).
    commands = []
    run = bench_memory.subprocess.run

    def recording_run(cmd, *args, **kwargs):
        commands.append(list(cmd))
        return run(cmd, *args, **kwargs)

    monkeypatch.setattr(bench_memory.subprocess, "run", recording_run)
    assert bench_memory.main(["--smoke", "--repeat", "1"]) == 0
    limited = [c for c in commands if "--peak-budget" in c]
    assert limited and all("--peak-search" in c for c in limited), [c for c in limited if "--peak-search" not in c]
    out = capsys.readouterr().out
    assert "| residual_mlp |" in out and "| NO |" not in out
    assert "figure: remat's peak budget is monotone | yes | met" in out
    assert "| transformer_4 |" in out
    svg = bench_memory.figure_svg([{"model": "m", "nodes": 3,
                                    "torch": [{"budget": 1.0, "peak": 2**20, "runtime": 1},
                                              {"budget": 0.5, "peak": 2**21, "runtime": 5}],
                                    "remat": [{"limit": 2**20, "peak": 2**20, "runtime": 1}]}])
    assert svg.startswith("<svg") and svg.count('stroke="#d00000"') >= 2  # the rise, and its legend
