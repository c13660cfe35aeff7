"""Peak memory: torch's activation budgets against remat's peak budget, and
what simulating and searching cost.

Three parts, each measured in one run:

* **The figure.** Corpus models (tests/python/corpus) with larger inputs, so
  activations weigh; for each, torch's partitioner at activation budgets from
  1 down to 0 (its own plans, simulated with `remat.torch.simulate_memory`
  and measured on CPU with the test suite's storage tracker) and remat's
  peak budget at limits from the runtime-optimized plan's peak down to the
  smallest reachable one. Each plan is a point: estimated recompute runtime
  (the flops estimator over what the backward recomputes; torch's plans
  priced by remat's identical plan at the same budget) against peak memory.
  Where a lower activation budget gives torch a *higher* peak, the segment is
  drawn in red and listed.
* **Simulation cost**: the `memory` stage of `remat partition -v` against
  the rest of the engine on synthetic graphs up to 10^6 nodes
  (bench/synthetic.py). Target: at most the partition's own time.
* **Search cost**: the engine under `peak_memory_budget` against a plain
  min-cut on the same graph, same run, at three limits (the plain plan's
  peak, the middle of the reachable range, the smallest reachable peak).
  Target: at most 5x.

    python bench/bench_memory.py                 # everything, printed
    python bench/bench_memory.py --write-docs    # also docs/memory.{md,svg,json}
    python bench/bench_memory.py --smoke         # tiny sizes (CI)
    python bench/bench_memory.py --from-json docs/memory.json --write-docs

The synthetic runs use $REMAT_BUILD_DIR/remat, else `remat` on PATH.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_min_cut  # noqa: E402

import cases  # noqa: E402
import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
import synthetic  # noqa: E402
from bench_partition import remat_command  # noqa: E402
from corpus import models  # noqa: E402
from corpus.capture import capture_case, replay_context, run_partition  # noqa: E402
from memtrack import measure_step  # noqa: E402

TORCH_BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.0)
LIMIT_STEPS = 10


# --------------------------------------------------------------------------- models


def _x(*shape):
    return lambda: models._randn(*shape, requires_grad=True)


def figure_models(smoke: bool) -> list[models.Case]:
    """Corpus models with inputs large enough that activations weigh."""
    s = 1 if smoke else 8
    return [
        models.Case("transformer_block", models._seeded(lambda: models.TransformerBlock(64)),
                    models._inputs(_x(2, 16 * s, 64))),
        models.Case("residual_mlp", models._seeded(lambda: models.ResidualMLP(64, 4)),
                    models._inputs(_x(64 * s, 64))),
        models.Case("cnn_bn_maxpool", models._seeded(lambda: models.CNNBatchNorm("max")),
                    models._inputs(_x(8 * s, 3, 8, 8))),
        models.Case("mlp_gelu_d6", models._seeded(lambda: models._mlp(64, 6, "gelu")),
                    models._inputs(_x(64 * s, 64))),
    ]


def _saved_names(fw: torch.fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    (out,) = fw.graph.find_nodes(op="output")
    leaves = torch.utils._pytree.arg_tree_leaves(*out.args)[num_fwd_outputs:]
    return [n.name if isinstance(n, torch.fx.Node) else repr(n) for n in leaves]


def _remat(cap, **options):
    joint = cap.fresh_joint()
    with replay_context(cap), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rt.partition(joint, options=rt.options_from_torch(**options), **cap.partition_kwargs())


def _smallest_peak(cap) -> int:
    try:
        _remat(cap, peak_memory_budget=1)
    except remat.BudgetUnreachableError as e:
        return int(re.search(r"smallest reachable peak is .*?\((\d+) bytes\)", str(e)).group(1))
    raise AssertionError("a 1-byte peak budget was met")


def figure_rows(case: models.Case) -> dict:
    print(f"[bench] figure: {case.name}: capturing", file=sys.stderr, flush=True)
    cap = capture_case(case)[0]
    torch_points = []
    for b in TORCH_BUDGETS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fw, bw = run_partition(torch_min_cut, cap, activation_memory_budget=b)
        ours = _remat(cap, activation_memory_budget=b)
        sim = rt.simulate_memory(fw, bw)
        torch_points.append({
            "budget": b,
            "peak": sim["memory"]["peak_bytes"],
            "measured": measure_step(fw, bw, cap.num_fwd_outputs).peak,
            "runtime": ours.result["recompute_runtime"],
            "same_plan": _saved_names(fw, cap.num_fwd_outputs) == _saved_names(ours.forward, cap.num_fwd_outputs),
            "hazards": len(sim["hazards"]),
        })
    top = _remat(cap).result["memory"]["peak_bytes"]
    bottom = _smallest_peak(cap)
    limits = sorted({top, bottom, *(bottom + (top - bottom) * k // LIMIT_STEPS for k in range(1, LIMIT_STEPS))},
                    reverse=True)
    remat_points = []
    for limit in limits:
        p = _remat(cap, peak_memory_budget=limit)
        remat_points.append({
            "limit": limit,
            "peak": p.result["memory"]["peak_bytes"],
            "measured": measure_step(p.forward, p.backward, cap.num_fwd_outputs).peak,
            "runtime": p.result["recompute_runtime"],
            "hazards": len(p.result["hazards"]),
        })
    return {"model": case.name, "nodes": len(cap.joint_module.graph.nodes), "torch": torch_points,
            "remat": remat_points}


def torch_rises(points: list[dict]) -> list[tuple[float, float, int, int]]:
    """(higher budget, lower budget, peak, higher peak) where lowering the budget raised the peak."""
    out = []
    for a, b in zip(points, points[1:]):
        if b["peak"] > a["peak"]:
            out.append((a["budget"], b["budget"], a["peak"], b["peak"]))
    return out


def remat_rises(points: list[dict]) -> int:
    return sum(1 for a, b in zip(points, points[1:]) if b["peak"] > a["peak"])


# --------------------------------------------------------------------------- the SVG


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _torch_labels(points: list[dict]) -> list[tuple[dict, str]]:
    """One label per run of consecutive budgets that gave the same point ("0.9-0.5")."""
    out = []
    i = 0
    while i < len(points):
        j = i
        while j + 1 < len(points) and (points[j + 1]["runtime"], points[j + 1]["peak"]) == (
                points[i]["runtime"], points[i]["peak"]):
            j += 1
        a, b = points[i]["budget"], points[j]["budget"]
        out.append((points[i], f"{a:g}" if i == j else f"{a:g}-{b:g}"))
        i = j + 1
    return out


def figure_svg(figs: list[dict]) -> str:
    """One panel per model: log10(1 + recompute runtime) against peak MiB."""
    cols = 2
    rows = (len(figs) + cols - 1) // cols
    pw, ph, ml, mr, mb, mt, top = 430, 300, 70, 40, 50, 30, 60
    width, height = cols * pw, rows * ph + top
    torch_color, remat_color, rise_color = "#e08a00", "#1f5fbf", "#d00000"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">Peak memory against '
           f'recompute time: torch\'s activation budget vs remat\'s peak budget</text>']
    lx, ly = width / 2 - 330, 42
    out.append(f'<circle cx="{lx}" cy="{ly}" r="3.5" fill="{torch_color}"/><text x="{lx + 8}" y="{ly + 4}">'
               f'torch, activation budget (labelled)</text>')
    out.append(f'<rect x="{lx + 227}" y="{ly - 3}" width="6" height="6" fill="{remat_color}"/>'
               f'<text x="{lx + 238}" y="{ly + 4}">remat, peak budget (limits high to low)</text>')
    out.append(f'<line x1="{lx + 470}" y1="{ly}" x2="{lx + 484}" y2="{ly}" stroke="{rise_color}" '
               f'stroke-width="2.5"/><text x="{lx + 490}" y="{ly + 4}">lower budget, higher peak</text>')
    for i, fig in enumerate(figs):
        ox, oy = (i % cols) * pw, top + (i // cols) * ph
        pts = fig["torch"] + fig["remat"]
        xs = [math.log10(1 + p["runtime"]) for p in pts]
        ys = [p["peak"] / 2**20 for p in pts]
        x0, x1 = min(xs), max(xs)
        y0, y1 = min(ys), max(ys)
        if x1 - x0 < 1e-9:
            x0, x1 = x0 - 0.5, x1 + 0.5
        pad = (y1 - y0) * 0.08 or max(y1 * 0.05, 1e-3)
        y0, y1 = y0 - pad, y1 + pad
        iw, ih = pw - ml - mr, ph - mt - mb

        def X(v, ox=ox, x0=x0, x1=x1, iw=iw):
            return ox + ml + (v - x0) / (x1 - x0) * iw

        def Y(v, oy=oy, y0=y0, y1=y1, ih=ih):
            return oy + mt + ih - (v - y0) / (y1 - y0) * ih

        out.append(f'<rect x="{ox + ml}" y="{oy + mt}" width="{iw}" height="{ih}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{ox + ml + iw / 2}" y="{oy + mt - 8}" text-anchor="middle" font-size="12">'
                   f'{_esc(fig["model"])} ({fig["nodes"]} nodes)</text>')
        for k in range(5):
            yv = y0 + (y1 - y0) * k / 4
            out.append(f'<text x="{ox + ml - 4}" y="{Y(yv) + 4:.1f}" text-anchor="end">{yv:.3g}</text>')
            xv = x0 + (x1 - x0) * k / 4
            out.append(f'<text x="{X(xv):.1f}" y="{oy + mt + ih + 14}" text-anchor="middle">{10 ** xv - 1:.3g}</text>')
        out.append(f'<text x="{ox + ml + iw / 2}" y="{oy + mt + ih + 30}" text-anchor="middle">'
                   f'estimated recompute runtime (flops, log scale)</text>')
        out.append(f'<text x="{ox + 14}" y="{oy + mt + ih / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {ox + 14} {oy + mt + ih / 2})">peak memory (MiB)</text>')
        for series, color in (("torch", torch_color), ("remat", remat_color)):
            p = fig[series]
            for a, b in zip(p, p[1:]):
                rise = b["peak"] > a["peak"]
                stroke = rise_color if rise else color
                w = 2.5 if rise else 1.5
                out.append(f'<line x1="{X(math.log10(1 + a["runtime"])):.1f}" y1="{Y(a["peak"] / 2**20):.1f}" '
                           f'x2="{X(math.log10(1 + b["runtime"])):.1f}" y2="{Y(b["peak"] / 2**20):.1f}" '
                           f'stroke="{stroke}" stroke-width="{w}"/>')
            for q in p:
                cx, cy = X(math.log10(1 + q["runtime"])), Y(q["peak"] / 2**20)
                if series == "torch":
                    out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="{color}"/>')
                else:
                    out.append(f'<rect x="{cx - 3:.1f}" y="{cy - 3:.1f}" width="6" height="6" fill="{color}"/>')
        placed: list[tuple[float, float, float]] = []  # (left, right, baseline) of labels drawn
        for q, label in _torch_labels(fig["torch"]):
            cx, cy = X(math.log10(1 + q["runtime"])), Y(q["peak"] / 2**20)
            anchor = "end" if cx > ox + ml + iw * 0.8 else "start"
            dx = -6 if anchor == "end" else 6
            w = 6 * len(label) + 4
            left = cx + dx - (w if anchor == "end" else 0)
            y = cy - 6
            while any(left < r and left + w > l and abs(y - b) < 10 for l, r, b in placed):
                y += 11  # stack labels that would overlap
            placed.append((left, left + w, y))
            cy = y + 6
            out.append(f'<text x="{cx + dx:.1f}" y="{cy - 6:.1f}" font-size="9" fill="{torch_color}" '
                       f'text-anchor="{anchor}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- costs


def _stages(stderr: str) -> dict[str, float]:
    m = re.search(r"ms per stage, (.*)\)", stderr)
    out = {}
    for part in m.group(1).split(", "):
        name, ms = part.rsplit(" ", 1)
        out[name] = float(ms) / 1e3
    return out


def _engine(stdout: str) -> float:
    return float(re.search(r"\(engine ([\d.]+) ms\)", stdout).group(1)) / 1e3


def _peak(stdout: str) -> int:
    return int(re.search(r"peak memory: .*?\((\d+) bytes\)", stdout).group(1))


def synthetic_rows(exe: str, sizes: list[int], repeat: int) -> list[dict]:
    """`remat partition -v` on synthetic graphs: the memory stage against the rest,
    and the engine under a peak budget against the plain one."""
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "joint.json")
            print(f"[bench] synthetic: {n} nodes", file=sys.stderr, flush=True)
            synthetic.main(["--nodes", str(n), "-o", path])

            def run(*extra: str) -> subprocess.CompletedProcess:
                return subprocess.run([exe, "partition", "-v", path, *extra], capture_output=True, text=True)

            first = run()
            first.check_returncode()
            peak = _peak(first.stdout)
            r = run("--peak-budget", "1")
            bottom = int(re.search(r"smallest reachable peak is .*?\((\d+) bytes\)", r.stderr).group(1))
            limits = {"top": peak, "mid": (peak + bottom) // 2, "bottom": bottom}
            # Interleaved, so that load changing during the run affects all alike.
            plain, memory, rest = [], [], []
            search: dict[str, list[float]] = {k: [] for k in limits}
            for _ in range(repeat):
                r = run()
                r.check_returncode()
                st = _stages(r.stderr)
                plain.append(_engine(r.stdout))
                memory.append(st.get("memory", 0.0))
                rest.append(sum(v for k, v in st.items() if k != "memory"))
                for label, limit in limits.items():
                    r = run("--peak-budget", str(limit))
                    r.check_returncode()
                    search[label].append(_engine(r.stdout))
            row = {"nodes": n, "engine": statistics.median(plain), "memory": statistics.median(memory),
                   "rest": statistics.median(rest), "peak": peak, "bottom": bottom}
            for label, times in search.items():
                row[f"search_{label}"] = statistics.median(times)
            rows.append(row)
    return rows


def case_rows(smoke: bool, repeat: int) -> list[dict]:
    """The engine in process on captured graphs: plain vs peak budget."""
    chosen = {"transformer_4": lambda: cases.transformer_stack(4)} if smoke else {
        "transformer_16": lambda: cases.transformer_stack(16),
        "transformer_48": lambda: cases.transformer_stack(48),
        "sequential_weights_1000": lambda: cases.sequential_weights(1000),
        "parallel_chains_128": lambda: cases.parallel_chains(128),
    }
    rows = []
    for name, build in chosen.items():
        print(f"[bench] search cost: {name}", file=sys.stderr, flush=True)
        j = build()
        doc = rt.export_joint_graph(j.gm, j.kwargs["num_fwd_outputs"],
                                    j.kwargs.get("static_lifetime_input_indices"), as_json=True)
        opts = rt.options_from_torch()

        def once(o):
            res = remat.partition(doc, o, as_json=False)
            return res["seconds"], res

        _, res = once(opts)
        top = res["memory"]["peak_bytes"]
        try:
            remat.partition(doc, {**opts, "peak_memory_budget": 1})
            bottom = top
        except remat.BudgetUnreachableError as e:
            bottom = int(re.search(r"smallest reachable peak is .*?\((\d+) bytes\)", str(e)).group(1))
        limits = {"top": top, "mid": (top + bottom) // 2, "bottom": bottom}
        plain, memory = [], []
        search: dict[str, list[float]] = {k: [] for k in limits}
        for _ in range(repeat):  # interleaved, as for the command
            t, res = once(opts)
            plain.append(t)
            memory.append(res["stages"].get("memory", 0.0))
            for label, limit in limits.items():
                search[label].append(once({**opts, "peak_memory_budget": limit})[0])
        row = {"graph": name, "nodes": j.nodes, "engine": statistics.median(plain),
               "memory": statistics.median(memory), "peak": top, "bottom": bottom}
        for label, times in search.items():
            row[f"search_{label}"] = statistics.median(times)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- report


def mib(b: int) -> str:
    return f"{b / 2**20:.3f}"


def format_figure_table(figs: list[dict]) -> str:
    lines = ["| model | nodes | torch: peak MiB at budget 1 → 0 | torch: lower budget, higher peak | "
             "torch: plans with mutation hazards | remat: peak MiB at limits high → low | remat rises | "
             "simulated = measured |",
             "|---|---|---|---|---|---|---|---|"]
    for f in figs:
        rises = torch_rises(f["torch"])
        rise_text = ", ".join(f"{a:g}→{b:g}: {mib(p)}→{mib(q)}" for a, b, p, q in rises) or "none"
        exact = all(p["peak"] == p["measured"] for p in f["torch"] + f["remat"])
        hazardous = [f"{p['budget']:g}" for p in f["torch"] if p["hazards"]]
        hazard_text = ("budgets " + ", ".join(hazardous)) if hazardous else "none"
        lines.append(
            f"| {f['model']} | {f['nodes']} | {' '.join(mib(p['peak']) for p in f['torch'])} | {rise_text} | "
            f"{hazard_text} | {' '.join(mib(p['peak']) for p in f['remat'])} | {remat_rises(f['remat'])} | "
            f"{'yes' if exact else 'NO'} |")
    return "\n".join(lines)


def format_costs(syn: list[dict], case: list[dict]) -> str:
    lines = ["| graph | nodes | engine (s) | memory stage (s) | memory / rest | peak budget at the plain "
             "peak | at the middle | at the smallest peak |", "|---|---|---|---|---|---|---|---|"]
    for r in case + syn:
        rest = r["rest"] if "rest" in r else r["engine"] - r["memory"]
        lines.append(f"| {r.get('graph', 'synthetic')} | {r['nodes']:,} | {r['engine']:.4f} | {r['memory']:.4f} | "
                     f"{r['memory'] / rest:.2f}x | {r['search_top'] / r['engine']:.2f}x | "
                     f"{r['search_mid'] / r['engine']:.2f}x | {r['search_bottom'] / r['engine']:.2f}x |")
    return "\n".join(lines)


def targets(figs, syn, case) -> list[tuple[str, str, bool]]:
    out = []
    big = [r for r in syn if r["nodes"] >= 1_000_000]
    if big:
        r = big[-1]
        ratio = r["memory"] / r["rest"]
        out.append(("simulation costs at most the partition's own time at 10^6 nodes",
                    f"{ratio:.2f}x ({r['memory']:.3f} s vs {r['rest']:.3f} s)", ratio <= 1))
    rows = syn + case
    if rows:
        worst_typical = max(max(r["search_top"], r["search_mid"]) / r["engine"] for r in rows)
        worst = max(r["search_bottom"] / r["engine"] for r in rows)
        out.append(("a peak-budget solve costs at most 5x a plain min-cut",
                    f"at most {worst_typical:.2f}x at the plain peak and mid-range limits; "
                    f"{worst:.2f}x at the smallest reachable peak", worst_typical <= 5))
    if figs:
        exact = all(p["peak"] == p["measured"] for f in figs for p in f["torch"] + f["remat"])
        out.append(("figure: simulated peak = measured peak for every plan drawn", "yes" if exact else "NO", exact))
        mono = all(remat_rises(f["remat"]) == 0 for f in figs)
        out.append(("figure: remat's peak budget is monotone", "yes" if mono else "NO", mono))
    return out


def format_targets(found) -> str:
    lines = ["| target | measured | |", "|---|---|---|"]
    for name, measured, ok in found:
        lines.append(f"| {name} | {measured} | {'met' if ok else 'NOT met'} |")
    return "\n".join(lines)


def write_docs(figs, syn, case) -> None:
    docs = os.path.join(ROOT, "docs")
    with open(os.path.join(docs, "memory.json"), "w") as f:
        json.dump({"figure": figs, "synthetic": syn, "cases": case}, f, indent=1)
    with open(os.path.join(docs, "memory.svg"), "w") as f:
        f.write(figure_svg(figs))
    with open(os.path.join(docs, "memory.md"), "w") as f:
        f.write("# Peak memory\n\n"
                "Generated by `python bench/bench_memory.py --write-docs` on this project's\n"
                "2-core machine. Peaks are the simulated peak memory of one training step\n"
                "(`memory.peak_bytes`, docs/format.md), each checked against a CPU run of the\n"
                "plan under a tracker of live tensor storages (the last column). Times are\n"
                "medians; ratios are measured in the same run.\n\n"
                "## torch's activation budget against remat's peak budget\n\n"
                "Corpus models (tests/python/corpus) with inputs large enough that activations\n"
                "weigh. Orange: torch's own plans at activation budgets 1, 0.9, ..., 0.1, 0.05,\n"
                "0, in that order along the line; red segments are where a *lower* budget gave\n"
                "a *higher* peak. Blue: remat's peak budget at limits from the runtime-optimized\n"
                "plan's peak down to the smallest reachable peak. x: estimated recompute\n"
                "runtime (torch's flops estimator over what the backward recomputes).\n\n"
                "![peak memory against recompute time](memory.svg)\n\n"
                + format_figure_table(figs) + "\n\n"
                "## What simulating and searching cost\n\n"
                "*memory / rest*: the engine's `memory` stage (the simulation, the hazard\n"
                "check, the recompute estimate) against all other stages. The last three\n"
                "columns: the engine under `peak_memory_budget` against the plain min-cut\n"
                "partition (one row: same graph, same run).\n\n"
                + format_costs(syn, case) + "\n\n"
                "## Targets (issue \"Plan against real peak memory\")\n\n"
                + format_targets(targets(figs, syn, case)) + "\n")
        notes = os.path.join(docs, "memory_notes.md")
        if os.path.exists(notes):
            with open(notes) as n:
                f.write("\n" + n.read())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    p.add_argument("--repeat", type=int, default=5, help="runs per timing (median)")
    p.add_argument("--sizes", type=int, nargs="*", default=None,
                   help="synthetic graph sizes (default 10000 100000 1000000; 1000 with --smoke)")
    p.add_argument("--no-figure", action="store_true")
    p.add_argument("--figure-from", help="take the figure's rows from a saved docs/memory.json")
    p.add_argument("--write-docs", action="store_true", help="write docs/memory.{md,svg,json}")
    p.add_argument("--from-json", help="re-render saved results (docs/memory.json) instead of measuring")
    a = p.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        figs, syn, case = saved["figure"], saved["synthetic"], saved["cases"]
        print(format_figure_table(figs) + "\n\n" + format_costs(syn, case) + "\n\n"
              + format_targets(targets(figs, syn, case)))
        if a.write_docs:
            write_docs(figs, syn, case)
        return 0
    torch._dynamo.config.cache_size_limit = 64
    chosen = figure_models(a.smoke)
    if a.smoke:
        chosen = [c for c in chosen if c.name == "residual_mlp"]
    if a.figure_from:
        with open(a.figure_from) as f:
            figs = json.load(f)["figure"]
    else:
        figs = [] if a.no_figure else [figure_rows(c) for c in chosen]
    exe = remat_command()
    sizes = a.sizes if a.sizes is not None else ([1000] if a.smoke else [10000, 100000, 1000000])
    if exe is None and sizes:
        print("[bench] synthetic: no remat command (set REMAT_BUILD_DIR); skipped", file=sys.stderr)
    syn = synthetic_rows(exe, sizes, a.repeat) if exe and sizes else []
    case = case_rows(a.smoke, a.repeat)
    found = targets(figs, syn, case)
    print(format_figure_table(figs) + "\n\n" + format_costs(syn, case) + "\n\n" + format_targets(found))
    if a.write_docs:
        write_docs(figs, syn, case)
    return 0 if all(ok for name, _, ok in found if name.startswith("figure")) else 1


if __name__ == "__main__":
    sys.exit(main())
