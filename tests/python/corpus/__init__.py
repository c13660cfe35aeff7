"""Parity corpus: a zoo of small models (``models``) and joint-graph capture/replay (``capture``)."""

from .capture import (CapturedGraph, captured_graphs, capture_case, dynamic_joint, replay_context,
                      run_partition)
from .models import CASES, CASES_BY_NAME, Case
from .shipped import shipped_documents

__all__ = [
    "CASES",
    "CASES_BY_NAME",
    "Case",
    "CapturedGraph",
    "capture_case",
    "captured_graphs",
    "dynamic_joint",
    "replay_context",
    "run_partition",
    "shipped_documents",
]
