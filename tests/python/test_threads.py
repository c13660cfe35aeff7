"""Engine calls from several Python threads at once: each gives what a call
alone gives. The engine releases the GIL while it runs, so these calls do
overlap inside C++; tools/test.sh also runs this file against an extension
built with ThreadSanitizer, which fails on any data race between them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

remat = pytest.importorskip("remat")

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = [(ROOT / "examples" / f"{name}.json").read_bytes()
          for name in ("transformer_block", "checkpointed", "mlp_dynamic")]
CALLS = [
    lambda g: remat.partition(g, as_json=False)["saved_values"],
    lambda g: remat.partition(g, {}, "default", as_json=False)["saved_values"],
    lambda g: remat.partition(g, {"activation_memory_budget": 0.3}, as_json=False)["saved_values"],
    lambda g: remat.pareto(g, resolution=1e-2),
    # A Python hook re-acquires the GIL inside the engine's call.
    lambda g: remat.partition(g, {"activation_memory_budget": 0.3}, as_json=False,
                              runtime_estimator=lambda node: 1.0)["saved_values"],
]


def _try(call, graph):
    try:
        return call(graph)
    except remat.RematError as e:  # a graph without a trade-off fails the same way each time
        return type(e).__name__


def test_concurrent_engine_calls_match_sequential_ones():
    expected = [[_try(call, g) for call in CALLS] for g in GRAPHS]
    errors: list = []

    def worker(offset: int) -> None:
        for round_ in range(2):
            for gi, graph in enumerate(GRAPHS):
                for k in range(len(CALLS)):
                    ci = (k + offset + round_) % len(CALLS)
                    got = _try(CALLS[ci], graph)
                    if got != expected[gi][ci]:
                        errors.append((gi, ci, got))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
