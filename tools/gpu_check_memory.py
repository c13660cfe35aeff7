#!/usr/bin/env python3
"""GPU check of the memory simulator: simulated peak against torch.cuda.max_memory_allocated.

For each deterministic corpus case (tests/python/corpus), on the first CUDA
device: capture the joint graph with the model and inputs on the GPU,
partition it with remat at activation budgets 1, 0.5 and 0.1 and at the
smallest reachable peak budget, and run one training step of each plan the
way the CPU tests do (tests/python/memtrack.py: boxed calling convention,
inputs held, saved values handed over, tangents allocated at the backward).
Three numbers per plan:

* simulated: the engine's memory.peak_bytes;
* tracked: live tensor-storage bytes after every op (the CPU tests' tracker,
  on CUDA tensors), which must equal the simulation exactly;
* allocator: torch.cuda.max_memory_allocated() during the step, minus what
  was allocated before it besides the step's inputs. It also counts the
  caching allocator's rounding (blocks of 512 bytes) and memory kernels take
  for themselves (cuBLAS / attention workspaces), which the simulator does
  not model: the difference is the error written into docs/memory.md.

    python tools/gpu_check_memory.py                   # table on stdout
    python tools/gpu_check_memory.py --write-docs      # also docs/memory_gpu.md
    python tools/gpu_check_memory.py --only mlp_relu_d2 transformer_block

Exit status 1 when a tracked peak differs from the simulated one. Needs
torch with CUDA and remat installed (pip install .); about a minute per
dozen cases.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch  # noqa: E402

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from corpus import CASES  # noqa: E402
from corpus.capture import _make_recorder, compile_case, loss_of, make_backend, replay_context  # noqa: E402
from memtrack import measure_step  # noqa: E402

BUDGETS = (1.0, 0.5, 0.1)


def to_cuda(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cuda().requires_grad_(x.requires_grad)
    return x


def capture_on_gpu(case):
    graphs = []
    model = case.make_module().cuda()
    inputs = tuple(to_cuda(x) for x in case.make_inputs())
    compiled = compile_case(case, model, make_backend(case, _make_recorder(case, graphs)), inputs)
    loss_of(compiled(*inputs)).backward()
    torch._dynamo.reset()
    return graphs


def plan(cap, **options):
    joint = cap.fresh_joint()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.partition(joint, options=rt.options_from_torch(**options), **cap.partition_kwargs())


def smallest_peak(cap):
    try:
        plan(cap, peak_memory_budget=1)
    except remat.BudgetUnreachableError as e:
        return e.smallest_peak
    return None


def allocator_peak(p, num_fwd_outputs):
    """(tracked peak, allocator peak) of one step on the GPU."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    tracker = measure_step(p.forward, p.backward, num_fwd_outputs, device="cuda")
    torch.cuda.synchronize()
    return tracker.peak, torch.cuda.max_memory_allocated() - before


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="case names")
    ap.add_argument("--write-docs", action="store_true", help="write docs/memory_gpu.md")
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check", file=sys.stderr)
        return 2
    rows, bad = [], 0
    for case in CASES:
        if case.random or (a.only and case.name not in a.only):
            continue  # CUDA random ops take the graph-safe RNG path, which remat does not reproduce
        try:
            graphs = capture_on_gpu(case)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{case.name}: capture failed: {e}", file=sys.stderr)
            continue
        for cap in graphs:
            plans = {f"budget {b}": plan(cap, activation_memory_budget=b) for b in BUDGETS}
            low = smallest_peak(cap)
            if low is not None:
                plans["peak budget"] = plan(cap, peak_memory_budget=low)
            for label, p in plans.items():
                simulated = p.result["memory"]["peak_bytes"]
                tracked, allocated = allocator_peak(p, cap.num_fwd_outputs)
                bad += tracked != simulated
                rows.append((cap.label, label, simulated, tracked, allocated))
    lines = ["| graph | plan | simulated (B) | tracked (B) | max_memory_allocated (B) | allocator - simulated |",
             "|---|---|---|---|---|---|"]
    errors = []
    for g, label, s, t, m in rows:
        errors.append((m - s) / s if s else 0.0)
        lines.append(f"| {g} | {label} | {s} | {t} | {m} | {m - s:+d} ({(m - s) / s * 100 if s else 0:+.1f}%) |")
    summary = (f"{len(rows)} plans on {torch.cuda.get_device_name()}: tracked == simulated for "
               f"{len(rows) - bad}; allocator vs simulated: median {statistics.median(errors) * 100:+.1f}%, "
               f"max {max(errors) * 100:+.1f}%") if rows else "no plans"
    text = "\n".join(lines) + "\n\n" + summary + "\n"
    print(text)
    if a.write_docs:
        with open(os.path.join(ROOT, "docs", "memory_gpu.md"), "w") as f:
            f.write("# Simulated peak memory against the CUDA allocator\n\n"
                    "Generated by `python tools/gpu_check_memory.py --write-docs`.\n\n" + text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
