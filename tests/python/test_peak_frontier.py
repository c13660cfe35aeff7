"""remat.peak_frontier: remat's own peak/recompute plans, as dicts like
remat.plans()'s (the binding only converts remat::peak_frontier's points;
the rules themselves are pinned in tests/cpp/test_frontier.cc)."""

from __future__ import annotations

from pathlib import Path

import pytest

import remat

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "cnn_batchnorm.json"


def test_each_point_is_the_partition_at_its_limit():
    doc = EXAMPLE.read_bytes()
    frontier = remat.peak_frontier(doc, {"peak_search": "exact"}, points=5)
    assert frontier and [p["peak_bytes"] for p in frontier] == sorted(p["peak_bytes"] for p in frontier)
    for p in frontier:
        assert set(p) == {"label", "peak_bytes", "recompute_runtime", "saved_values", "limit_bytes"}
        assert p["label"].startswith("exact <= ") and p["peak_bytes"] <= p["limit_bytes"]
        r = remat.partition(doc, {"peak_search": "exact", "peak_memory_budget": p["limit_bytes"]},
                            as_json=False)
        assert r["memory"]["peak_bytes"] == p["peak_bytes"]
        assert len(r["saved_values"]) == p["saved_values"]


def test_torch_plans_is_not_a_frontier_and_fast_is_the_default():
    doc = EXAMPLE.read_bytes()
    with pytest.raises(remat.InvalidOptionError, match="fast or exact"):
        remat.peak_frontier(doc, {"peak_search": "torch_plans"})
    frontier = remat.peak_frontier(doc, points=3)
    assert frontier and all(p["label"].startswith("fast <= ") for p in frontier)
