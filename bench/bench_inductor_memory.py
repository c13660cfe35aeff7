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

    python bench/bench_inductor_memory.py            # every scaled case
    python bench/bench_inductor_memory.py --smoke    # one case
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
from inductor_steps import SCALED_CASES, compile_and_measure  # noqa: E402


def rows(names: list[str] | None) -> list[dict]:
    out = []
    with pytest.MonkeyPatch.context() as mp:
        for case in SCALED_CASES:
            if names and case.name not in names:
                continue
            print(f"[bench] {case.name}", file=sys.stderr, flush=True)
            step = compile_and_measure(case, rt, mp)
            aten = rt.simulate_memory(step.forward, step.backward, step.num_fwd_outputs)["memory"]["peak_bytes"]
            out.append({"model": case.name, "measured": step.measured,
                        "inductor": step.result["memory"]["peak_bytes"], "aten": aten})
    return out


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
    p.add_argument("models", nargs="*", help="scaled case names (default: all)")
    a = p.parse_args(argv)
    names = ["layernorm_gelu_mlp"] if a.smoke else a.models
    found = rows(names)
    print(table(found))
    print()
    print(summary(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
