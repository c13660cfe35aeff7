"""Keeps the benchmark harness working: bench/bench_partition.py on tiny
graphs. It asserts only that torch and remat produce identical graphs; speed
is measured by running the benchmark itself, never in tests."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("remat.torch")

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def test_benchmark_smoke_run_reports_identical_outputs(capsys):
    sys.path.insert(0, BENCH)
    try:
        import bench_partition
    finally:
        sys.path.pop(0)
    assert bench_partition.main(["--smoke", "--repeat", "1", "--torch-repeat", "1"]) == 0
    table = capsys.readouterr().out
    # Static and dynamic shapes, min-cut and default partitioner rows.
    assert table.count("| yes |") == 6 and "| NO |" not in table
    assert "| transformer_1_dynamic [default] |" in table
    assert "| target | measured |" in table
    if bench_partition.remat_command() is not None:  # the scaling runs of the command
        assert "| nodes | load (s) | partition, engine (s) | µs / node |" in table
        assert "| 2,993 |" in table, table
