"""What remat's memory-aware backward order (backward_order "memory",
src/memory/order.h) gains on the parity corpus.

For every corpus graph (tests/python/corpus) under the running torch, two
numbers per order (autograd's, remat's memory order):

* the simulated peak of the default plan (no limit), and
* the smallest peak the "fast" peak search reaches (its BudgetUnreachableError
  at a 1-byte limit), where the search plans against the order that runs.

Prints a markdown table of the graphs where either differs, and a summary
line; docs/memory.md quotes it.

    python bench/bench_backward_order.py            # every corpus graph
    python bench/bench_backward_order.py --smoke    # three graphs (CI)
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))

import torch  # noqa: E402

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from corpus import captured_graphs  # noqa: E402
from corpus.capture import replay_context  # noqa: E402
from corpus.models import CASES_BY_NAME  # noqa: E402

ORDERS = ("autograd", "memory")


def _partition(cap, **options):
    joint = cap.fresh_joint()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.partition(joint, options=rt.options_from_torch(**options), **cap.partition_kwargs())


def measure(name: str) -> dict | None:
    (cap, *_) = captured_graphs(name)
    row = {"model": name}
    for order in ORDERS:
        p = _partition(cap, backward_order=order)
        row[order] = p.result["memory"]["peak_bytes"]
        try:
            _partition(cap, backward_order=order, peak_memory_budget=1, peak_search="fast")
            raise AssertionError(f"{name}: a 1-byte limit was met")
        except remat.BudgetUnreachableError as e:
            row[order + "_smallest"] = e.smallest_peak
    return row


def _pct(a: int, b: int) -> str:
    return f"{100 * (a - b) / a:+.2f}%" if a else "0"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="three graphs (CI)")
    a = p.parse_args(argv)
    names = sorted(CASES_BY_NAME)
    if a.smoke:
        names = ["gru_unrolled", "mlp_relu_d2", "residual_mlp"]
    rows = []
    for name in names:
        print(f"[bench] {name}", file=sys.stderr, flush=True)
        rows.append(measure(name))
    print(f"torch {torch.__version__}, {len(rows)} corpus graphs\n")
    print("| model | default plan: autograd B | memory B | lower by | fast's smallest peak: autograd B | memory B | lower by |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["autograd"] == r["memory"] and r["autograd_smallest"] == r["memory_smallest"]:
            continue
        print(f"| {r['model']} | {r['autograd']} | {r['memory']} | {_pct(r['autograd'], r['memory'])} "
              f"| {r['autograd_smallest']} | {r['memory_smallest']} "
              f"| {_pct(r['autograd_smallest'], r['memory_smallest'])} |")
    lower = [r for r in rows if r["memory"] < r["autograd"]]
    s_lower = [r for r in rows if r["memory_smallest"] < r["autograd_smallest"]]
    s_higher = [r for r in rows if r["memory_smallest"] > r["autograd_smallest"]]
    mean = sum((r["autograd"] - r["memory"]) / r["autograd"] for r in rows) / len(rows)
    print(f"\nDefault plan: lower on {len(lower)} of {len(rows)} graphs, never higher "
          f"(mean {100 * mean:.2f}%, max {max(100 * (r['autograd'] - r['memory']) / r['autograd'] for r in rows):.2f}%). "
          f"fast's smallest peak: lower on {len(s_lower)}, higher on {len(s_higher)}.")
    assert all(r["memory"] <= r["autograd"] for r in rows), "the memory order raised a default plan's peak"
    return 0


if __name__ == "__main__":
    sys.exit(main())
