"""How close remat's memory models come to inductor-compiled CPU steps.

For every model of tests/python/inductor_steps.py SCALED_CASES (corpus
models at sizes where activations weigh), under the running torch: the
model is compiled with ``torch.compile(backend="inductor")`` through
``remat.torch.install()``, one training step is measured with the
profiler's memory events (the peak of every CPU allocation and free, plus
the parameters and inputs held before the step), and set beside

* the engine's peak under inductor's model (``memory_model`` "inductor",
  what the drop-in uses for graphs inductor compiles), and
* aten's model on the same forward/backward pair (the storages an op-by-op
  run holds: exact for eager FX code and aot_eager).

Prints a markdown table and a summary line; docs/memory.md quotes it.

``--limits`` also plans every model under ``peak_memory_budget`` at
fractions of its default plan's simulated peak (``search="fast"``,
inductor's model), compiles and measures each returned plan: the model's
peak against the measured one, and whether the measured step stays under
the limit.

    python bench/bench_inductor_memory.py            # every scaled case
    python bench/bench_inductor_memory.py --limits   # and under peak limits
    python bench/bench_inductor_memory.py --more     # 22 more corpus models
    python bench/bench_inductor_memory.py --smoke    # one case
    python bench/bench_inductor_memory.py --no-reorder   # inductor's peak-memory reorder off
    python bench/bench_inductor_memory.py --orders   # the order that pass kept per graph

``--no-reorder`` compiles with ``torch._inductor.config.reorder_for_peak_memory``
off: the steps then run inductor's fused kernels in the order the model
assumes, so comparing a run with and without it shows what that pass (which
the model does not follow) moves.

``--more`` measures inductor_steps.MORE_CASES instead: 22 more corpus
models (its widths, at a batch where activations weigh).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "python"))

import pytest  # noqa: E402
import torch  # noqa: E402

import remat.torch as rt  # noqa: E402
from inductor_steps import MORE_CASES, SCALED_CASES, compile_and_measure  # noqa: E402


class ReorderPicks:
    """Within it, for each graph inductor compiles, the peak estimates its
    reorder_for_peak_memory pass compared (the graph's order first, then its
    topological sorts), read from the signpost event the pass emits; a
    release whose pass emits none leaves `seen` empty."""

    def __init__(self) -> None:
        self.seen: list[dict[str, int]] = []

    def __enter__(self) -> "ReorderPicks":
        import torch._inductor.memory as memory

        self._memory, self._original = memory, getattr(memory, "signpost_event", None)
        if self._original is not None:
            def spy(category, name, parameters):
                if name == "memory" and "orm" in parameters:
                    self.seen.append(dict(parameters["orm"]))
                return self._original(category, name, parameters)

            memory.signpost_event = spy
        return self

    def __exit__(self, *exc) -> None:
        if self._original is not None:
            self._memory.signpost_event = self._original

    def picks(self) -> list[tuple[str, int, int]]:
        """Per graph: the order the pass kept (the first least estimate, as
        its min() over the list does), its estimate, the graph order's."""
        return [(min(orm, key=orm.get), min(orm.values()), orm.get("baseline", -1)) for orm in self.seen]


def rows(names: list[str] | None, cases=SCALED_CASES, orders: bool = False) -> list[dict]:
    out = []
    with pytest.MonkeyPatch.context() as mp:
        for case in cases:
            if names and case.name not in names:
                continue
            print(f"[bench] {case.name}", file=sys.stderr, flush=True)
            with ReorderPicks() as recorded:
                step = compile_and_measure(case, rt, mp)
            aten = rt.simulate_memory(step.forward, step.backward, step.num_fwd_outputs)["memory"]["peak_bytes"]
            out.append({"model": case.name, "measured": step.measured,
                        "inductor": step.result["memory"]["peak_bytes"], "aten": aten})
            if orders:
                out[-1]["orders"] = recorded.picks()
                # The orders remat's model simulated, forward then backward
                # (the order inductor compiles them in).
                kernel_orders = step.result["memory"].get("kernel_orders", {})
                out[-1]["simulated"] = [kernel_orders.get(g, {}).get("simulated", [])
                                        for g in ("forward", "backward")]
    return out


# inductor's names for its orders (reorder_for_peak_memory's signpost) and
# remat's (the result's memory.kernel_orders).
ORDER_NAMES = {"baseline": "graph", "topological_sort_lpmf": "lpmf", "topological_sort_bfs": "bfs",
               "topological_sort_dfs": "dfs"}


def orders_table(found: list[dict]) -> str:
    lines = ["| model | graph (compile order) | order kept | its estimate | the graph order's estimate "
             "| orders remat simulated | kept among them |",
             "|---|---:|---|---:|---:|---|:---:|"]
    for r in found:
        simulated = r.get("simulated", [])
        for k, (kept, estimate, baseline) in enumerate(r.get("orders", []), 1):
            ours = simulated[k - 1] if k <= len(simulated) else []
            among = "yes" if ORDER_NAMES.get(kept, kept) in ours else "NO"
            lines.append(f"| {r['model']} | {k} | {kept} | {estimate} | {baseline} | {', '.join(ours)} | {among} |")
    return "\n".join(lines)


LIMIT_FRACTIONS = (0.95, 0.9, 0.85, 0.75)


def limit_rows(names: list[str] | None, fractions=LIMIT_FRACTIONS, cases=SCALED_CASES) -> list[dict]:
    """Each model planned at `fractions` of its default simulated peak; a
    limit below the smallest reachable peak is reported as unreachable."""
    import remat

    out = []
    with pytest.MonkeyPatch.context() as mp:
        for case in cases:
            if names and case.name not in names:
                continue
            default = compile_and_measure(case, rt, mp).result["memory"]["peak_bytes"]
            for f in fractions:
                print(f"[bench] {case.name} at {f:.0%}", file=sys.stderr, flush=True)
                limit = int(f * default)
                row = {"model": case.name, "fraction": f, "limit": limit}
                try:
                    with rt.peak_memory_budget(limit, search="fast", memory_model="inductor"):
                        step = compile_and_measure(case, rt, mp)
                except Exception as err:  # torch wraps the engine's error
                    cause = err
                    while cause is not None and not isinstance(cause, remat.BudgetUnreachableError):
                        cause = getattr(cause, "inner_exception", None) or cause.__cause__
                    if cause is None:
                        raise
                    row["unreachable"] = cause.smallest_peak
                    out.append(row)
                    continue
                row.update(measured=step.measured, inductor=step.result["memory"]["peak_bytes"])
                out.append(row)
    return out


def limit_table(found: list[dict]) -> str:
    lines = ["| model | limit | bytes | inductor model | measured | model / measured | measured <= limit |",
             "|---|---:|---:|---:|---:|---:|:---:|"]
    for r in found:
        head = f"| {r['model']} | {r['fraction']:.0%} | {r['limit']} |"
        if "unreachable" in r:
            lines.append(f"{head} unreachable (smallest {r['unreachable']}) | | | |")
            continue
        m = r["measured"]
        lines.append(f"{head} {r['inductor']} | {m} | {r['inductor'] / m:.3f} | "
                     f"{'yes' if m <= r['limit'] else 'NO'} |")
    return "\n".join(lines)


def limit_summary(found: list[dict]) -> str:
    planned = [r for r in found if "measured" in r]
    within = sum(1 for r in planned if abs(r["inductor"] / r["measured"] - 1) <= 0.03)
    over = sum(1 for r in planned if r["measured"] > r["limit"])
    return (f"torch {torch.__version__}: {len(planned)} plans under a limit ({len(found) - len(planned)} limits "
            f"unreachable); the model within 3% of the measured step on {within}; {over} measured over "
            f"their limit.")


def table(found: list[dict]) -> str:
    lines = ["| model | measured (inductor step) | inductor model | / measured | aten model | / measured |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in found:
        m = r["measured"]
        lines.append(f"| {r['model']} | {m} | {r['inductor']} | {r['inductor'] / m:.3f} | "
                     f"{r['aten']} | {r['aten'] / m:.3f} |")
    return "\n".join(lines)


def summary(found: list[dict]) -> str:
    within = sum(1 for r in found if abs(r["inductor"] / r["measured"] - 1) <= 0.1)
    aten_within = sum(1 for r in found if abs(r["aten"] / r["measured"] - 1) <= 0.1)
    return (f"torch {torch.__version__}: inductor's model within 10% of the measured step on {within} of "
            f"{len(found)} models; aten's model on {aten_within}.")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="one model (CI)")
    p.add_argument("--limits", action="store_true", help="also plan and measure under peak limits")
    p.add_argument("--more", action="store_true",
                   help="22 more corpus models (inductor_steps.MORE_CASES) instead")
    p.add_argument("--no-reorder", action="store_true",
                   help="compile with inductor's reorder_for_peak_memory pass off")
    p.add_argument("--orders", action="store_true",
                   help="also print which order inductor's reorder pass kept for each graph, by its estimates")
    p.add_argument("models", nargs="*", help="scaled case names (default: all)")
    a = p.parse_args(argv)
    with inductor_settings(reorder=not a.no_reorder):
        return measure(a)


def inductor_settings(reorder: bool):
    """inductor's configuration for the run: its reorder_for_peak_memory pass
    on (inductor's default) or off, restored afterwards."""
    import torch._inductor.config as inductor_config

    return inductor_config.patch(reorder_for_peak_memory=reorder)


def measure(a: argparse.Namespace) -> int:
    names = ["layernorm_gelu_mlp"] if a.smoke else a.models
    cases = MORE_CASES if a.more else SCALED_CASES
    found = rows(names, cases, orders=a.orders)
    print(table(found))
    print()
    print(summary(found))
    if a.orders:
        print()
        print(orders_table(found))
    if a.limits:
        limited = limit_rows(names, cases=cases)
        print()
        print(limit_table(limited))
        print()
        print(limit_summary(limited))
    return 0


if __name__ == "__main__":
    sys.exit(main())
