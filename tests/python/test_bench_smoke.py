"""Keeps the benchmark harness working: bench/bench_partition.py on tiny
graphs, bench/bench_small_dynamic.py, and bench/bench_scale.py on its
smallest stored graph. It asserts only that torch and remat produce identical
graphs and that the tables have their rows and columns; speed is measured by
running the benchmark itself, never in tests."""

from __future__ import annotations

import pytest

pytest.importorskip("remat.torch")

from benches import bench_module  # noqa: E402


@pytest.mark.one_release
def test_benchmark_smoke_run_reports_identical_outputs(capsys):
    bench_partition = bench_module("bench_partition")
    assert bench_partition.main(["--smoke", "--repeat", "1", "--torch-repeat", "1"]) == 0
    table = capsys.readouterr().out
    # Static and dynamic shapes, min-cut and default partitioner rows, rows
    # with post-cut rewrites (offloading, FP8 activation quantization), and a
    # stored CUDA graph partitioned in its own context (HOP RNG threading).
    assert table.count("| yes |") >= 10 and "| NO |" not in table
    assert "| transformer_1_dynamic [default] |" in table
    import torch

    separate_stream = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 12)
    # torch 2.11's separate stream is refused by remat, and not timed.
    assert ("| transformer_1 @offload async+sink+prefetch |" in table) == separate_stream
    assert "| rng_hop_dropout [default] |" in table
    assert "| transformer_1 [fp8] |" in table
    assert "with FP8 activation quantization" in table
    assert "| target | measured |" in table
    if bench_partition.remat_command() is not None:  # the scaling runs of the command
        assert "| nodes | load (s) | partition, engine (s) | µs / node |" in table
        assert "| 2,993 |" in table, table


@pytest.mark.one_release
def test_small_dynamic_benchmark_times_every_graph(capsys):
    bench_small_dynamic = bench_module("bench_small_dynamic")
    assert bench_small_dynamic.main(["--repeat", "1"]) == 0
    table = capsys.readouterr().out
    # Both models' graph breaks leave two graphs each, all timed four ways.
    rows = [line for line in table.splitlines() if line.startswith(("buckets[", "router["))]
    assert len(rows) == 4 and all(len(r.split()) == 9 for r in rows), table


@pytest.mark.one_release
def test_scale_benchmark_reports_every_search_at_each_limit(capsys):
    bench_scale = bench_module("bench_scale")
    smallest = bench_scale.stored_graphs()[0]
    if bench_scale.remat_command() is None:
        pytest.skip("the remat command is not on PATH (or set REMAT_BUILD_DIR)")
    # Two limits (the plain plan's peak and the smallest reachable one), a
    # half-second exact and a short guard: a search that runs past it is a
    # "timed out" cell, and the table still has every row and column.
    assert bench_scale.main(["--quick", "--timeout", "5"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = "| " + " | ".join(bench_scale.COLUMNS) + " |"
    assert header in lines, out
    name = bench_scale.graph_name(smallest)
    width = len(bench_scale.COLUMNS) + 1
    rows = [line for line in lines if line.startswith(f"| {name} | ") and line.count("|") == width]
    assert len(rows) == 2, out
    # The range row: the plain peak and the smallest reachable peak, both numbers.
    (floor_row,) = [line for line in lines if line.startswith(f"| {name} |") and line.count("|") == 7]
    plain_peak, _, smallest_peak = (floor_row.split("|")[3:6])
    assert float(smallest_peak) < float(plain_peak), floor_row
    assert "- fast within 10x a plain partition:" in out
