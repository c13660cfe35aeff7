"""Peak memory: torch's activation budgets against remat's peak budget, and
what simulating and searching cost, and remat's optimizer against torch's plans.

Four parts, each measured in one run:

* **The figure.** Corpus models (tests/python/corpus) with larger inputs, so
  activations weigh; for each, torch's partitioner at activation budgets from
  1 down to 0 (its own plans, simulated with `remat.torch.simulate_memory`
  and measured on CPU with the test suite's storage tracker) and remat's
  peak budget (under --figure-search, fast by default) at limits from the
  runtime-optimized plan's peak down to the smallest peak that search
  finds. Each plan is a point: estimated recompute runtime
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
* **remat's optimizer against torch's plans**: on the figure's models, at
  the peak of each of torch's plans (and below its smallest), remat with
  `peak_search` torch_plans, fast and exact: recompute, peak, exact's proof
  and bound, each search's smallest reachable peak, and engine time against
  a plain min-cut of the same graph. Targets: fast at most 5% more
  recompute than exact wherever exact proves optimality, and never
  unreachable where exact finds a plan; fast at most 5x a plain min-cut on
  ~10^4-node synthetic graphs (at the middle of torch_plans' reachable
  range and of fast's, which checkpointed plans extend). exact's programs are
  written out (REMAT_MILP_DUMP_DIR, src/optimize/search.h) and solved
  again by CBC as remat runs it (bench/cpp/milp_bench.cc), the `cbc`
  command and HiGHS (bench/milp_solvers.py, under --highs-python).

    python bench/bench_memory.py                 # everything, printed
    python bench/bench_memory.py --write-docs    # also docs/memory.{md,svg,json}
    python bench/bench_memory.py --smoke         # tiny sizes (CI)
    python bench/bench_memory.py --from-json docs/memory.json --write-docs
    python bench/bench_memory.py --figure-only docs/memory.json --write-docs
    python bench/bench_memory.py --optimizer-only docs/memory.json --write-docs \
        --highs-python /tmp/highs/bin/python --milp-bench BUILD/bench/cpp/remat_milp_bench

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
import textwrap
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


def _smallest_peak(cap, search: str = "torch_plans") -> int:
    try:
        _remat(cap, peak_memory_budget=1, peak_search=search)
    except remat.BudgetUnreachableError as e:
        return e.smallest_peak
    raise AssertionError("a 1-byte peak budget was met")


_CAPTURES: dict = {}


def _capture(case: models.Case):
    """One capture per model and run: the figure and the optimizer section share it."""
    if case.name not in _CAPTURES:
        print(f"[bench] {case.name}: capturing", file=sys.stderr, flush=True)
        _CAPTURES[case.name] = capture_case(case)[0]
    return _CAPTURES[case.name]


def figure_rows(case: models.Case, search: str = "fast") -> dict:
    """torch's plans at each activation budget, and remat's peak budget under
    `search` at limits from the plain plan's peak down to the search's own
    smallest peak."""
    print(f"[bench] figure: {case.name}", file=sys.stderr, flush=True)
    cap = _capture(case)
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
    bottom = _smallest_peak(cap, search)
    limits = sorted({top, bottom, *(bottom + (top - bottom) * k // LIMIT_STEPS for k in range(1, LIMIT_STEPS))},
                    reverse=True)
    remat_points = []
    for limit in limits:
        p = _remat(cap, peak_memory_budget=limit, peak_search=search)
        remat_points.append({
            "limit": limit,
            "peak": p.result["memory"]["peak_bytes"],
            "measured": measure_step(p.forward, p.backward, cap.num_fwd_outputs).peak,
            "runtime": p.result["recompute_runtime"],
            "hazards": len(p.result["hazards"]),
        })
    return {"model": case.name, "nodes": len(cap.joint_module.graph.nodes), "torch": torch_points,
            "remat": remat_points, "search": search}


def figure_search(figs: list[dict]) -> str:
    """The search the figure's remat line used (rows saved before it was
    recorded used torch_plans)."""
    found = {f.get("search", "torch_plans") for f in figs}
    return found.pop() if len(found) == 1 else "mixed"


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
    lx, ly = width / 2 - 360, 42
    out.append(f'<circle cx="{lx}" cy="{ly}" r="3.5" fill="{torch_color}"/><text x="{lx + 8}" y="{ly + 4}">'
               f'torch, activation budget (labelled)</text>')
    out.append(f'<rect x="{lx + 227}" y="{ly - 3}" width="6" height="6" fill="{remat_color}"/>'
               f'<text x="{lx + 238}" y="{ly + 4}">remat, peak budget, {_esc(figure_search(figs))} '
               f'(limits high to low)</text>')
    out.append(f'<line x1="{lx + 520}" y1="{ly}" x2="{lx + 534}" y2="{ly}" stroke="{rise_color}" '
               f'stroke-width="2.5"/><text x="{lx + 540}" y="{ly + 4}">lower budget, higher peak</text>')
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


def _recompute(stdout: str) -> float:
    return float(re.search(r"estimated recompute runtime: (\S+)", stdout).group(1))


def _peak(stdout: str) -> int:
    return int(re.search(r"peak memory: .*?\((\d+) bytes\)", stdout).group(1))


def _budget(limit: int, search: str) -> list[str]:
    """The CLI's arguments for a peak limit under one search, always named:
    a bare --peak-budget runs whichever search is the default (fast since
    2026-12-05), so the torch_plans rows measured fast until it was named."""
    return ["--peak-budget", str(limit), "--peak-search", search]


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
            r = run(*_budget(1, "torch_plans"))
            bottom = int(re.search(r"smallest (?:reachable peak|peak found) is .*?\((\d+) bytes\)", r.stderr).group(1))
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
                    r = run(*_budget(limit, "torch_plans"))
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
            remat.partition(doc, {**opts, "peak_memory_budget": 1, "peak_search": "torch_plans"})
            bottom = top
        except remat.BudgetUnreachableError as e:
            bottom = e.smallest_peak
        limits = {"top": top, "mid": (top + bottom) // 2, "bottom": bottom}
        plain, memory = [], []
        search: dict[str, list[float]] = {k: [] for k in limits}
        for _ in range(repeat):  # interleaved, as for the command
            t, res = once(opts)
            plain.append(t)
            memory.append(res["stages"].get("memory", 0.0))
            for label, limit in limits.items():
                search[label].append(once({**opts, "peak_memory_budget": limit, "peak_search": "torch_plans"})[0])
        row = {"graph": name, "nodes": j.nodes, "engine": statistics.median(plain),
               "memory": statistics.median(memory), "peak": top, "bottom": bottom}
        for label, times in search.items():
            row[f"search_{label}"] = statistics.median(times)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- the optimizer

_UNREACHABLE = re.compile(r"smallest (?:reachable peak|peak found) is .*?\((\d+) bytes\)(?:.*?(smaller peak \(proven\)|"
                          r"peak below .*?\((\d+) bytes\) \(proven\)))?")


def _unreachable(e: Exception) -> tuple[int, int | None]:
    """(smallest peak found, proven lower bound of any valid plan's peak or None) from the error."""
    m = _UNREACHABLE.search(str(e))
    found = int(m.group(1))
    if m.group(2) == "smaller peak (proven)":
        return found, found
    return found, int(m.group(3)) if m.group(3) else None


def _summary(result: dict) -> dict:
    ps = result["peak_search"]
    return {"peak": result["memory"]["peak_bytes"], "runtime": result["recompute_runtime"],
            "seconds": result["seconds"], "optimal": ps["optimal"], "bound": ps["recompute_lower_bound"],
            "plans_built": ps["plans_built"], "solver_rounds": ps["solver_rounds"],
            "hazards": len(result["hazards"])}


# exact runs in a child process: CBC 2.10 as Debian builds it keeps its
# assertions, and one (CbcBranchDynamic.cpp, `distance >= 0.0`) aborted a
# whole benchmark run from inside an exact search; a child's abort is
# recorded ("crashed") and the run goes on. The child runs the engine on the
# joint graph as remat.torch exports it, with the same options.
_CHILD = """
import json, sys, remat
doc = open(sys.argv[1], "rb").read()
opts = json.load(open(sys.argv[2]))
try:
    res = remat.partition(doc, opts, as_json=False)
except remat.BudgetUnreachableError as e:
    print(json.dumps({"unreachable": str(e)}))
else:
    print(json.dumps({"result": {k: res[k] for k in ("memory", "recompute_runtime", "seconds", "peak_search",
                                                        "hazards")}}))
"""


def _exported(cap) -> str:
    """The joint graph as remat.torch hands it to the engine, in a file (one per model)."""
    path = os.path.join(tempfile.gettempdir(), f"remat_bench_{os.getpid()}_{cap.case}.json")
    if not os.path.exists(path):
        joint = cap.fresh_joint()
        with replay_context(cap), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = cap.partition_kwargs()
            doc = rt.export_joint_graph(joint, kw["num_fwd_outputs"], kw["static_lifetime_input_indices"], as_json=True)
        with open(path, "wb") as f:
            f.write(doc if isinstance(doc, bytes) else doc.encode())
    return path


def _child(cap, limit: int, search: str, seconds: float, dump: str | None) -> dict:
    """{"result": ...} or {"unreachable": message} or {"crashed": what the child said}."""
    env = dict(os.environ)
    if dump is not None:
        os.makedirs(dump, exist_ok=True)
        env["REMAT_MILP_DUMP_DIR"] = dump  # exact writes each program there (optimize/search.h)
    with replay_context(cap):
        opts = rt.options_from_torch(peak_memory_budget=limit, peak_search=search, peak_search_seconds=seconds)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(opts, f)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, _exported(cap), f.name], capture_output=True, text=True,
                           env=env)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        tail = [line for line in r.stderr.strip().splitlines() if line][-1:] or [f"exit {r.returncode}"]
        print(f"[bench] {cap.case} at {limit}, {search}: the engine crashed: {tail[0]}", file=sys.stderr, flush=True)
        return {"crashed": f"{tail[0]} (exit {r.returncode})"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _search(cap, limit: int, search: str, seconds: float, dump: str | None = None) -> dict | None:
    """remat at `limit` with peak_search `search`; None when it raised
    BudgetUnreachableError; exact in a child process ({"crashed": ...} when it died)."""
    if search == "exact":
        out = _child(cap, limit, search, seconds, dump)
        if "crashed" in out:
            return out
        return None if "unreachable" in out else _summary(out["result"])
    try:
        p = _remat(cap, peak_memory_budget=limit, peak_search=search, peak_search_seconds=seconds)
    except remat.BudgetUnreachableError:
        return None
    return _summary(p.result)


def _smallest(cap, search: str, seconds: float, dump: str | None = None) -> tuple[int | None, int | None]:
    """(smallest peak, proven bound) from the error at a 1-byte limit; (None, None) when exact crashed."""
    if search == "exact":
        out = _child(cap, 1, search, seconds, dump)
        if "crashed" in out:
            return None, None
        return _unreachable(out["unreachable"])
    try:
        _remat(cap, peak_memory_budget=1, peak_search=search, peak_search_seconds=seconds)
    except remat.BudgetUnreachableError as e:
        return _unreachable(e)
    raise AssertionError("a 1-byte peak budget was met")


def optimizer_rows(case: models.Case, fig: dict, exact_seconds: float, repeat: int,
                   dump_root: str | None) -> dict:
    """remat's fast and exact searches at the peak of each of torch's plans
    (and below torch's smallest), with the plain min-cut timed in the same run.

    `fig` is the model's figure row (torch's plans: simulated peak and the
    estimated recompute of remat's identical plan). With `dump_root`, exact's
    programs go to dump_root/<model>/<limit> (REMAT_MILP_DUMP_DIR)."""
    print(f"[bench] optimizer: {case.name}", file=sys.stderr, flush=True)
    cap = _capture(case)
    smallest = {"torch": min(p["peak"] for p in fig["torch"]),
                "torch_plans": _smallest_peak(cap)}
    smallest["fast"], smallest["fast_bound"] = _smallest(cap, "fast", exact_seconds)
    # At a 1-byte limit exact's programs are the limit's (infeasible) and then
    # the smallest-peak search's; they are dumped under limit "1".
    smallest["exact"], smallest["exact_bound"] = _smallest(
        cap, "exact", exact_seconds, os.path.join(dump_root, case.name, "1") if dump_root else None)
    # Torch's distinct peaks, then limits below what torch's plans reach (where
    # only remat's own searches can answer): exact's smallest peak, and
    # halfway from it to torch_plans' smallest.
    limits = sorted({p["peak"] for p in fig["torch"]}, reverse=True)
    lowest = smallest["exact"] if smallest["exact"] is not None else smallest["fast"]
    below = sorted({lowest, (lowest + smallest["torch_plans"]) // 2} - set(limits), reverse=True)
    rows, plain = [], []
    for limit in limits + [b for b in below if b < smallest["torch_plans"]]:
        at = [p for p in fig["torch"] if p["peak"] == limit]
        fits = [p for p in fig["torch"] if p["peak"] <= limit and not p["hazards"]]
        row = {"limit": limit, "torch_budgets": [p["budget"] for p in at],
               "torch_runtime": min((p["runtime"] for p in at), default=None),
               "torch_hazards": any(p["hazards"] for p in at),
               # The best torch plan without hazards whose peak fits the limit.
               "torch_best": min((p["runtime"] for p in fits), default=None)}
        fast_times = []
        for _ in range(repeat):  # interleaved with the plain partition, as in the cost tables
            plain.append(_remat(cap).result["seconds"])
            r = _search(cap, limit, "fast", exact_seconds)
            if r is not None:
                fast_times.append(r["seconds"])
        row["fast"] = r
        if r is not None:
            r["seconds"] = statistics.median(fast_times)
        dump = os.path.join(dump_root, case.name, str(limit)) if dump_root else None
        row["exact"] = _search(cap, limit, "exact", exact_seconds, dump)
        row["torch_plans"] = _search(cap, limit, "torch_plans", exact_seconds)
        rows.append(row)
    os.unlink(_exported(cap))
    return {"model": case.name, "nodes": fig["nodes"], "smallest": smallest, "rows": rows,
            "plain_seconds": statistics.median(plain), "exact_seconds_limit": exact_seconds}


def synthetic_search_rows(exe: str, nodes: int, batches: list[int], repeat: int) -> list[dict]:
    """`remat partition` against `--peak-search fast`, same run, at two limits
    per graph: the middle of torch_plans' reachable range (its smallest peak
    to the plain plan's), where torch's plans fit, and the middle of fast's
    (from fast's smallest peak), where on a deep stack only checkpointed
    plans do. A range of one point (the weights set the peak) gives one row."""
    rows = []
    for batch in batches:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "joint.json")
            print(f"[bench] optimizer: synthetic {nodes} nodes, batch {batch}", file=sys.stderr, flush=True)
            synthetic.main(["--nodes", str(nodes), "--batch", str(batch), "-o", path])

            def run(*extra: str) -> subprocess.CompletedProcess:
                return subprocess.run([exe, "partition", "-v", path, *extra], capture_output=True, text=True)

            first = run()
            first.check_returncode()
            top = _peak(first.stdout)
            r = run(*_budget(1, "fast"))
            bottom, bound = _unreachable(r.stderr)
            torch_bottom, _ = _unreachable(run(*_budget(1, "torch_plans")).stderr)
            limits = {"torch_plans": (top + torch_bottom) // 2, "fast": (top + bottom) // 2}
            if limits["fast"] == limits["torch_plans"]:
                del limits["torch_plans"]
            for reach, mid in limits.items():
                plain, fast, torch_plans = [], [], []
                for _ in range(repeat):
                    r = run()
                    r.check_returncode()
                    plain.append(_engine(r.stdout))
                    r = run(*_budget(mid, "fast"))
                    r.check_returncode()
                    fast.append(_engine(r.stdout))
                    fast_peak = _peak(r.stdout)
                    fast_runtime = _recompute(r.stdout)
                    t = run(*_budget(mid, "torch_plans"))
                    torch_plans.append(_engine(t.stdout) if t.returncode == 0 else None)
                    tp = (_peak(t.stdout), _recompute(t.stdout)) if t.returncode == 0 else None
                rows.append({"nodes": nodes, "batch": batch, "reach": reach, "plain_peak": top,
                             "fast_smallest": bottom, "torch_plans_smallest": torch_bottom,
                             "fast_bound": bound, "limit": mid, "fast_peak": fast_peak, "fast_runtime": fast_runtime,
                             "torch_plans_peak": tp and tp[0], "torch_plans_runtime": tp and tp[1],
                             "plain": statistics.median(plain), "fast": statistics.median(fast),
                             "torch_plans": statistics.median(torch_plans) if None not in torch_plans else None})
    return rows


def solver_rows(dump_root: str, highs_python: str | None, milp_bench: str | None, seconds: float,
                per_run: int = 2) -> dict:
    """CBC (as remat runs it, and the `cbc` command) and HiGHS on exact mode's
    programs: per exact run, its first and its last program (the last carries
    every no-good cut of the run)."""
    picked = []
    for model in sorted(os.listdir(dump_root)):
        for limit in sorted(os.listdir(os.path.join(dump_root, model)), key=int, reverse=True):
            d = os.path.join(dump_root, model, limit)
            files = sorted(os.listdir(d), key=lambda f: int(f.split(".")[0]))
            for f in sorted({files[0], files[-1]} if files else set(), key=lambda f: int(f.split(".")[0]))[:per_run]:
                picked.append((model, int(limit), os.path.join(d, f), len(files)))
    if not picked:
        return {"versions": {}, "files": []}
    cmd = [highs_python or sys.executable, os.path.join(HERE, "milp_solvers.py"), "--seconds", str(seconds)]
    if milp_bench:
        cmd += ["--milp-bench", milp_bench]
    print(f"[bench] solvers: {len(picked)} programs", file=sys.stderr, flush=True)
    result = os.path.join(dump_root, "solvers.json")
    r = subprocess.run(cmd + ["-o", result] + [f for _, _, f, _ in picked], capture_output=True, text=True)
    if r.returncode != 0:  # keep the rest of the run's measurements
        print(f"[bench] solvers failed:\n{r.stderr}", file=sys.stderr)
        return {"versions": {}, "files": []}
    with open(result) as f:
        out = json.load(f)
    for row, (model, limit, f, n) in zip(out["files"], picked):
        row.update({"model": model, "limit": limit, "program": os.path.basename(f), "programs_in_run": n})
        row["file"] = os.path.relpath(f, dump_root)
    return out


def milp_bench_command() -> str | None:
    """bench/cpp's remat_milp_bench: $REMAT_BENCH_BUILD_DIR, else the build's bench/cpp."""
    for d in (os.environ.get("REMAT_BENCH_BUILD_DIR"), os.environ.get("REMAT_BUILD_DIR")):
        if d:
            exe = os.path.join(d, "bench", "cpp", "remat_milp_bench")
            if os.path.exists(exe):
                return exe
    return None


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


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else (1.0 if a == 0 else math.inf)


def _rt(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def _crashed(r: dict | None) -> bool:
    return r is not None and "crashed" in r


def _plan(r: dict | None) -> dict | None:
    """The search's plan; None when it was unreachable or crashed."""
    return None if r is None or "crashed" in r else r


def _res(r: dict | None) -> str:
    if _crashed(r):
        return "crashed"
    return "unreachable" if r is None else f"{r['runtime']:.4g} ({mib(r['peak'])})"


def _vs(r: dict | None, torch_best: float | None) -> str:
    """remat's recompute over the best torch plan's ("0" where remat recomputes nothing)."""
    r = _plan(r)
    if r is None or torch_best is None:
        return "—"
    return f"{_ratio(r['runtime'], torch_best):.3g}"


def format_optimizer(opt: list[dict]) -> str:
    lines = ["| model | limit MiB | torch budgets at this peak | torch recompute | best torch plan ≤ limit | "
             "torch_plans search | fast: recompute (peak MiB) | exact: recompute (peak MiB) | exact optimal "
             "(lower bound) | fast / best torch | exact / best torch | fast / exact |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in opt:
        for r in m["rows"]:
            ex, fa = _plan(r["exact"]), r["fast"]
            budgets = ", ".join(f"{b:g}" for b in r["torch_budgets"]) or "none (below torch's plans)"
            if r["torch_hazards"]:
                budgets += " (hazards)"
            proof = "—" if ex is None else ("yes" if ex["optimal"] else "no") + (
                f" ({ex['bound']:.4g})" if ex["bound"] is not None else "")
            vs_exact = "—" if ex is None or fa is None else f"{_ratio(fa['runtime'], ex['runtime']):.3f}"
            lines.append(f"| {m['model']} | {mib(r['limit'])} | {budgets} | {_rt(r['torch_runtime'])} | "
                         f"{_rt(r['torch_best'])} | {_res(r['torch_plans'])} | {_res(fa)} | {_res(r['exact'])} | "
                         f"{proof} | {_vs(fa, r['torch_best'])} | {_vs(ex, r['torch_best'])} | {vs_exact} |")
    return "\n".join(lines)


def versus_torch(m: dict, search: str) -> tuple[list[float], int, int, int]:
    """At torch's own peaks: `search`'s recompute over the best torch plan's,
    and how often it is less, the same, more (unreachable counts as more)."""
    ratios, less, same, more = [], 0, 0, 0
    for r in m["rows"]:
        if not r["torch_budgets"] or r["torch_best"] is None:
            continue
        x = _plan(r[search])
        if x is None:  # unreachable (or crashed)
            more += 1
            continue
        ratios.append(_ratio(x["runtime"], r["torch_best"]))
        if x["runtime"] < r["torch_best"] - 0.5:
            less += 1
        elif x["runtime"] > r["torch_best"] + 0.5:
            more += 1
        else:
            same += 1
    return ratios, less, same, more


def format_optimizer_summary(opt: list[dict]) -> str:
    lines = ["| model | torch's peaks | fast / best torch recompute (min, median, max) | fast: less, same, more | "
             "exact / best torch (min, median, max) | exact: less, same, more | "
             "smallest peak MiB: torch's plans | torch_plans search | fast (its proven bound) | "
             "exact (its proven bound) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m in opt:
        sm = m["smallest"]
        bound = lambda b: "none" if b is None else mib(b)  # noqa: E731
        cells = []
        for search in ("fast", "exact"):
            ratios, less, same, more = versus_torch(m, search)
            cells.append(f"{min(ratios):.3g}, {statistics.median(ratios):.3g}, {max(ratios):.3g}" if ratios else "—")
            cells.append(f"{less}, {same}, {more}")
        n = sum(1 for r in m["rows"] if r["torch_budgets"])
        exact = "crashed" if sm["exact"] is None else f"{mib(sm['exact'])} ({bound(sm['exact_bound'])})"
        lines.append(f"| {m['model']} | {n} | {' | '.join(cells)} | {mib(sm['torch'])} | {mib(sm['torch_plans'])} | "
                     f"{mib(sm['fast'])} ({bound(sm['fast_bound'])}) | {exact} |")
    return "\n".join(lines)


def fast_vs_exact(opt: list[dict]) -> dict:
    """fast's recompute over exact's where exact proved optimality; fast
    unreachable where exact found a plan."""
    gaps, unreachable = [], []
    crashed = [(m["model"], r["limit"]) for m in opt for r in m["rows"] if _crashed(r["exact"])]
    crashed += [(m["model"], 1) for m in opt if m["smallest"]["exact"] is None]
    for m in opt:
        for r in m["rows"]:
            ex, fa = _plan(r["exact"]), r["fast"]
            if ex is not None and fa is None:
                unreachable.append((m["model"], r["limit"]))
            if ex is not None and fa is not None and ex["optimal"]:
                gaps.append((_ratio(fa["runtime"], ex["runtime"]), m["model"], r["limit"]))
    total = sum(1 for m in opt for r in m["rows"] if _plan(r["exact"]) is not None)
    return {"gaps": sorted(gaps, reverse=True), "unreachable": unreachable, "exact_plans": total,
            "runs": sum(len(m["rows"]) for m in opt), "crashed": crashed}


def format_optimizer_times(opt: list[dict]) -> str:
    lines = ["| model | nodes | limit MiB | plain min-cut (s) | fast (s) | fast / plain | exact (s) | exact / plain "
             "| exact: solver rounds, plans built |", "|---|---|---|---|---|---|---|---|---|"]
    for m in opt:
        plain = m["plain_seconds"]
        for r in m["rows"]:
            fa, ex = r["fast"], _plan(r["exact"])
            fast = ("—", "—") if fa is None else (f"{fa['seconds']:.5f}", f"{fa['seconds'] / plain:.1f}x")
            exact = (("crashed" if _crashed(r["exact"]) else "—", "—", "—") if ex is None else
                     (f"{ex['seconds']:.2f}", f"{ex['seconds'] / plain:,.0f}x",
                      f"{ex['solver_rounds']}, {ex['plans_built']}"))
            lines.append(f"| {m['model']} | {m['nodes']} | {mib(r['limit'])} | {plain:.5f} | {fast[0]} | {fast[1]} | "
                         f"{exact[0]} | {exact[1]} | {exact[2]} |")
    return "\n".join(lines)


def format_synthetic_search(rows: list[dict]) -> str:
    lines = ["| nodes | batch | plain peak MiB | smallest peak MiB: torch_plans, fast | limit MiB (middle of) | "
             "fast: peak MiB, recompute | torch_plans: peak MiB, recompute | plain (s) | fast (s) | fast / plain | "
             "torch_plans / plain |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tp = "unreachable" if r["torch_plans"] is None else f"{r['torch_plans'] / r['plain']:.2f}x"
        tplan = ("unreachable" if r.get("torch_plans_peak") is None else
                 f"{mib(r['torch_plans_peak'])}, {r['torch_plans_runtime']:.4g}")
        # Rows from before 2026-12-03 measured one limit, in fast's range.
        smallest = (f"{mib(r['torch_plans_smallest'])}, {mib(r['fast_smallest'])}" if "torch_plans_smallest" in r
                    else f"?, {mib(r['fast_smallest'])}")
        reach = r.get("reach", "fast")
        lines.append(f"| {r['nodes']:,} | {r['batch']} | {mib(r['plain_peak'])} | {smallest} | "
                     f"{mib(r['limit'])} ({reach}'s range) | {mib(r['fast_peak'])}, {r['fast_runtime']:.4g} | "
                     f"{tplan} | {r['plain']:.4f} | {r['fast']:.4f} | {r['fast'] / r['plain']:.1f}x | {tp} |")
    return "\n".join(lines)


def format_solvers(sol: dict) -> str:
    if not sol.get("files"):
        return "(no programs were solved in this run)"
    names = [("remat", "CBC as remat runs it"), ("cbc", "`cbc` command"), ("highs", "HiGHS")]
    names = [(k, t) for k, t in names if any(k in f for f in sol["files"])]
    lines = ["| model | limit MiB | program (of the run's) | rows × columns | "
             + " | ".join(f"{t}: status, objective, s" for _, t in names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    for f in sol["files"]:
        cells = []
        for k, _ in names:
            r = f.get(k)
            if r is None:
                cells.append("—")
                continue
            obj = "" if r["objective"] is None else f", {r['objective']:.6g}"
            sec = "?" if r["seconds"] is None else f"{r['seconds']:.3f}"
            cells.append(f"{r['status']}{obj}, {sec}")
        limit = "1 B (smallest peak)" if f["limit"] == 1 else mib(f["limit"])
        lines.append(f"| {f['model']} | {limit} | {f['program']} ({f['programs_in_run']}) | "
                     f"{f['rows']} × {f['columns']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def solver_summary(sol: dict) -> dict:
    """Totals per solver, and the programs all solved where they differ: by
    at least half a unit (a unit of estimated recompute, or a byte of peak),
    naming the solvers above the least objective, or in the tie-break only
    (its coefficients sum to 1e-4, at the solvers' tolerances)."""
    files = sol.get("files", [])
    keys = [k for k in ("remat", "cbc", "highs") if any(k in f for f in files)]
    total = {k: sum(f[k]["seconds"] or 0 for f in files if k in f) for k in keys}
    solved = {k: sum(1 for f in files if k in f and f[k]["status"] in ("optimal", "infeasible")) for k in keys}
    disagree, tie_break = [], []
    for f in files:
        rs = {k: f[k] for k in keys if k in f}
        if not all(r["status"] in ("optimal", "infeasible") for r in rs.values()):
            continue
        if len({r["status"] for r in rs.values()}) > 1:
            disagree.append((f["file"], [k for k, r in rs.items() if r["status"] == "infeasible"]))
            continue
        objs = {k: r["objective"] for k, r in rs.items() if r["objective"] is not None}
        if not objs:
            continue
        least = min(objs.values())
        above = [k for k, o in objs.items() if o - least >= 0.5]
        if above:
            disagree.append((f["file"], above))
        elif max(objs.values()) - least > 1e-9 * max(1.0, abs(least)):
            tie_break.append(f["file"])
    return {"solvers": keys, "total_seconds": total, "solved": solved, "programs": len(files),
            "disagree": disagree, "tie_break": tie_break}


def targets(figs, syn, case, opt: dict | None = None) -> list[tuple[str, str, bool]]:
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
        out.append(("a peak-budget solve (torch_plans) costs at most 5x a plain min-cut",
                    f"at most {worst_typical:.2f}x at the plain peak and mid-range limits; "
                    f"{worst:.2f}x at the smallest reachable peak", worst_typical <= 5))
    if opt and opt.get("models"):
        fe = fast_vs_exact(opt["models"])
        if fe["gaps"]:
            g, model, limit = fe["gaps"][0]
            over = [x for x in fe["gaps"] if x[0] > 1.05]
            text = (f"worst {g:.3f} ({model} at {mib(limit)} MiB) over the {len(fe['gaps'])} limits exact "
                    f"proved optimal (of {fe['runs']})")
            if over:
                text += "; over 1.05: " + ", ".join(f"{m} at {mib(lim)} MiB: {x:.3g}" for x, m, lim in over)
            out.append(("fast: at most 5% more recompute than exact where exact is optimal", text, not over))
        else:
            out.append(("fast: at most 5% more recompute than exact where exact is optimal",
                        f"not measured: exact proved no limit optimal (of {fe['runs']})", False))
        un = fe["unreachable"]
        out.append(("fast: never unreachable where exact finds a plan",
                    "never, at " + f"{fe['exact_plans']} limits where exact found one" if not un else
                    "unreachable at " + ", ".join(f"{m} {mib(lim)} MiB" for m, lim in un), not un))
    if opt and opt.get("models"):
        crashed = fast_vs_exact(opt["models"])["crashed"]
        out.append(("exact: every search returns (the process is never aborted)",
                    "yes" if not crashed else "CBC aborted the process at " + ", ".join(
                        f"{m} {'1 B' if lim == 1 else mib(lim) + ' MiB'}" for m, lim in crashed), not crashed))
    if opt and opt.get("synthetic"):
        worst = max(opt["synthetic"], key=lambda r: r["fast"] / r["plain"])
        ratio = worst["fast"] / worst["plain"]
        out.append(("peak search fast costs at most 5x a plain min-cut at ~10^4 nodes (synthetic, the middle of "
                    "torch_plans' and of fast's reachable range)",
                    f"{ratio:.1f}x at batch {worst['batch']}, {worst.get('reach', 'fast')}'s range "
                    f"({worst['fast']:.4f} s vs {worst['plain']:.4f} s)", ratio <= 5))
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


def format_optimizer_section(opt: dict) -> str:
    """The optimizer's tables, as printed and as docs/memory.md has them."""
    if not opt:
        return ""
    parts = []
    if opt.get("models"):
        fe = fast_vs_exact(opt["models"])
        parts += [format_optimizer_summary(opt["models"]), format_optimizer(opt["models"]),
                  format_optimizer_times(opt["models"])]
        parts.append(f"fast / exact where exact proved optimality: worst {fe['gaps'][0][0]:.3f}, "
                     f"{sum(1 for g in fe['gaps'] if g[0] <= 1.0 + 1e-12)} of {len(fe['gaps'])} equal."
                     if fe["gaps"] else "exact proved no limit optimal.")
        if fe["crashed"]:
            parts[-1] += " exact's child process died (CBC aborted) at: " + ", ".join(
                f"{m} {'1 B' if lim == 1 else mib(lim) + ' MiB'}" for m, lim in fe["crashed"]) + "."
    if opt.get("synthetic"):
        parts.append(format_synthetic_search(opt["synthetic"]))
    return "\n\n".join(parts)


def format_solver_section(opt: dict | None) -> str:
    """The solver comparison's table and summary ("" when none ran)."""
    sol = (opt or {}).get("solvers") or {}
    ss = solver_summary(sol)
    parts = []
    if sol.get("files"):
        versions = ", ".join(f"{k} {v}" for k, v in sol.get("versions", {}).items())
        totals = ", ".join(f"{k} {v:.2f} s ({ss['solved'][k]} of {ss['programs']} solved)"
                           for k, v in ss["total_seconds"].items())
        names = {"remat": "CBC as remat runs it", "cbc": "the `cbc` command", "highs": "HiGHS"}
        agree = ("Statuses and optima agree on every program all of them solved (to half a unit)."
                 if not ss["disagree"] else "Half a unit or more above the least objective (a "
                 "solution reported optimal that is not), or infeasible where another solved: " + "; ".join(
                     f"{' and '.join(names[k] for k in above)} on {file}" for file, above in ss["disagree"]) + ".")
        tie = (f" {len(ss['tie_break'])} more differ in the tie-break only." if ss["tie_break"] else "")
        parts.append(format_solvers(sol) + f"\n\nTotal solve time: {totals} ({versions}). " + agree + tie)
    return "\n\n".join(parts)


def write_docs(figs, syn, case, opt: dict | None = None) -> None:
    docs = os.path.join(ROOT, "docs")
    with open(os.path.join(docs, "memory.json"), "w") as f:
        json.dump({"figure": figs, "synthetic": syn, "cases": case, "optimizer": opt}, f, indent=1)
    with open(os.path.join(docs, "memory.svg"), "w") as f:
        f.write(figure_svg(figs))
    section = ""
    if opt and opt.get("models"):
        fill = lambda text: textwrap.fill(text, 78, break_on_hyphens=False)  # noqa: E731
        models_text = ", ".join(m["model"] for m in opt["models"])
        section = ("## remat's optimizer against torch's plans\n\n" + fill(
            f"The figure's models ({models_text}). For each peak P one of torch's plans reaches (its budgets "
            "listed; *torch recompute*: the estimated recompute of that plan; *best torch plan ≤ limit*: the "
            "least of any of torch's plans without a mutation hazard whose peak fits), remat under "
            "`peak_memory_budget` = P with `peak_search` torch_plans, fast and exact; and below torch's "
            "smallest peak, at exact's smallest peak and halfway to it. exact runs with its node budget sized "
            f"to the program and `peak_search_seconds` = {opt['exact_seconds']:g} as a safety net; its lower bound is the recompute no valid plan goes below (proven, "
            "as the engine reports it: see the notes). *fast / best torch*, *exact / best torch*: the "
            "search's recompute over the best torch plan's (below 1: remat needs less at the same peak; 0: "
            "it recomputes nothing). The first table summarizes them over torch's peaks (less, same, more: "
            "how many; an unreachable limit counts as more) and gives each search's smallest peak "
            "(BudgetUnreachableError's at a 1-byte limit, with the proven lower bound it names).") + "\n\n" + fill(
            f"Times: engine seconds (`seconds` of the result), fast the median of {opt['repeat']} runs "
            "interleaved with as many plain min-cut partitions of the same graph. The synthetic rows: `remat "
            "partition` against `--peak-search fast` at the middle of torch_plans' reachable range and at the "
            "middle of fast's (each search's smallest peak to the plain plan's), graphs from "
            "`bench/synthetic.py --batch B` (at batch 32 the weights and their gradients set the peak, so the "
            "range is one point).") + "\n\n"
            + format_optimizer_section(opt) + "\n\n")
        if opt.get("solvers", {}).get("files"):
            section += ("### The MILP solver\n\n" + fill(
                "exact's programs, written by the runs above (`REMAT_MILP_DUMP_DIR`; per run the first program "
                "and the last, which carries all of exact's no-good cuts), each solved cold, single-threaded, "
                f"relative and absolute gap 1e-9, at most {opt['solvers'].get('seconds', 60):g} s "
                "(bench/milp_solvers.py): CBC through remat's own `Milp` (bench/cpp/milp_bench.cc: the cut "
                "generators and heuristics exact mode uses), the `cbc` command (CbcSolver's defaults, with "
                "preprocessing; its clock prints 0.01 s steps) and HiGHS through highspy. Objectives are in "
                "the program's units (the estimated recompute plus the saved-bytes tie-break, or the model's "
                "peak in bytes for the smallest-peak programs).") + "\n\n"
                + format_solver_section(opt) + "\n\n")
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
                + textwrap.fill(
                    f"a *higher* peak. Blue: remat's peak budget under its {figure_search(figs)} search "
                    + ("(the default) " if figure_search(figs) == "fast" else "(fast is the default since "
                       "2026-12-05) ")
                    + "at limits from the runtime-optimized plan's peak down to the smallest peak that search "
                    "finds. x: estimated recompute runtime (torch's flops estimator over what the backward "
                    "recomputes).", 78, break_on_hyphens=False) + "\n\n"
                "![peak memory against recompute time](memory.svg)\n\n"
                + format_figure_table(figs) + "\n\n"
                "## What simulating and searching cost\n\n"
                "*memory / rest*: the engine's `memory` stage (the simulation, the hazard\n"
                "check, the recompute estimate) against all other stages. The last three\n"
                "columns: the engine under `peak_memory_budget` (the torch_plans search) against the plain min-cut\n"
                "partition (one row: same graph, same run).\n\n"
                + format_costs(syn, case) + "\n\n"
                + section
                + "## Targets (issue \"Plan against real peak memory\")\n\n"
                + format_targets(targets(figs, syn, case, opt)) + "\n")
        notes = os.path.join(docs, "memory_notes.md")
        if os.path.exists(notes):
            with open(notes) as n:
                f.write("\n" + n.read())


def measure_optimizer(a, figs: list[dict], chosen: list[models.Case], exe: str | None) -> dict:
    """The optimizer section: corpus models, the synthetic graphs, the solvers."""
    by_name = {c.name: c for c in chosen}
    exact_seconds = a.exact_seconds if a.exact_seconds is not None else (1 if a.smoke else 60)
    dump_root = None
    if not a.smoke and not a.no_solvers:
        dump_root = tempfile.mkdtemp(prefix="remat_milp_")
    models_out = []
    for fig in figs:
        case = by_name.get(fig["model"])
        if case is None:
            continue
        if a.smoke:  # two limits are enough to keep the code paths running
            fig = {**fig, "torch": [p for p in fig["torch"] if p["budget"] in (1.0, 0.5)]}
        models_out.append(optimizer_rows(case, fig, exact_seconds, a.repeat, dump_root))
    nodes = 1000 if a.smoke else a.search_nodes
    batches = [32] if a.smoke else a.search_batches
    syn_search = synthetic_search_rows(exe, nodes, batches, a.repeat) if exe and batches else []
    solvers = {}
    if dump_root:
        milp_bench = a.milp_bench or milp_bench_command()
        if milp_bench is None:
            print("[bench] solvers: no remat_milp_bench (-DREMAT_BUILD_BENCH=ON, or --milp-bench)", file=sys.stderr)
        solvers = solver_rows(dump_root, a.highs_python, milp_bench, a.solver_seconds)
        solvers["seconds"] = a.solver_seconds
    return {"models": models_out, "synthetic": syn_search, "solvers": solvers, "exact_seconds": exact_seconds,
            "repeat": a.repeat}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    p.add_argument("--repeat", type=int, default=5, help="runs per timing (median)")
    p.add_argument("--sizes", type=int, nargs="*", default=None,
                   help="synthetic graph sizes (default 10000 100000 1000000; 1000 with --smoke)")
    p.add_argument("--no-figure", action="store_true")
    p.add_argument("--figure-from", help="take the figure's rows from a saved docs/memory.json")
    p.add_argument("--figure-only", metavar="JSON",
                   help="measure only the figure; the cost tables and the optimizer section from a saved "
                        "docs/memory.json")
    p.add_argument("--figure-search", default="fast", choices=("fast", "torch_plans", "exact"),
                   help="the peak search of the figure's remat line (default fast, remat's default)")
    p.add_argument("--write-docs", action="store_true", help="write docs/memory.{md,svg,json}")
    p.add_argument("--from-json", help="re-render saved results (docs/memory.json) instead of measuring")
    p.add_argument("--optimizer-only", metavar="JSON",
                   help="measure only the optimizer section; the figure and the cost tables from a saved "
                        "docs/memory.json")
    p.add_argument("--no-optimizer", action="store_true", help="skip the optimizer section")
    p.add_argument("--exact-seconds", type=float, default=None,
                   help="peak_search_seconds for exact, a safety net beside its node budget (default 60; 1 with --smoke)")
    p.add_argument("--search-nodes", type=int, default=10000, help="synthetic graph size for fast's cost")
    p.add_argument("--search-batches", type=int, nargs="*", default=[32, 2048],
                   help="synthetic batch sizes for fast's cost")
    p.add_argument("--no-solvers", action="store_true", help="skip the MILP solver comparison")
    p.add_argument("--highs-python", help="an interpreter with highspy, for the solver comparison")
    p.add_argument("--milp-bench", help="bench/cpp's remat_milp_bench (default: under $REMAT_BENCH_BUILD_DIR "
                                        "or $REMAT_BUILD_DIR)")
    p.add_argument("--solver-seconds", type=float, default=60, help="time limit per program and solver")
    a = p.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        figs, syn, case, opt = saved["figure"], saved["synthetic"], saved["cases"], saved.get("optimizer")
        print(format_figure_table(figs) + "\n\n" + format_costs(syn, case) + "\n\n"
              + format_optimizer_section(opt) + "\n\n" + format_solver_section(opt) + "\n\n"
              + format_targets(targets(figs, syn, case, opt)))
        if a.write_docs:
            write_docs(figs, syn, case, opt)
        return 0
    torch._dynamo.config.cache_size_limit = 64
    chosen = figure_models(a.smoke)
    if a.smoke:
        chosen = [c for c in chosen if c.name == "residual_mlp"]
    exe = remat_command()
    opt = None
    if a.figure_only:
        with open(a.figure_only) as f:
            saved = json.load(f)
        figs = [figure_rows(c, a.figure_search) for c in chosen]
        syn, case, opt = saved["synthetic"], saved["cases"], saved.get("optimizer")
    elif a.optimizer_only:
        with open(a.optimizer_only) as f:
            saved = json.load(f)
        figs, syn, case = saved["figure"], saved["synthetic"], saved["cases"]
    else:
        if a.figure_from:
            with open(a.figure_from) as f:
                figs = json.load(f)["figure"]
        else:
            figs = [] if a.no_figure else [figure_rows(c, a.figure_search) for c in chosen]
        sizes = a.sizes if a.sizes is not None else ([1000] if a.smoke else [10000, 100000, 1000000])
        if exe is None and sizes:
            print("[bench] synthetic: no remat command (set REMAT_BUILD_DIR); skipped", file=sys.stderr)
        syn = synthetic_rows(exe, sizes, a.repeat) if exe and sizes else []
        case = case_rows(a.smoke, a.repeat)
    if not a.figure_only:
        opt = None if a.no_optimizer else measure_optimizer(a, figs, chosen, exe)
    found = targets(figs, syn, case, opt)
    print(format_figure_table(figs) + "\n\n" + format_costs(syn, case) + "\n\n"
          + (format_optimizer_section(opt) + "\n\n" + format_solver_section(opt) + "\n\n" if opt else "")
          + format_targets(found))
    if a.write_docs:
        write_docs(figs, syn, case, opt)
    return 0 if all(ok for name, _, ok in found if name.startswith("figure")) else 1


if __name__ == "__main__":
    sys.exit(main())
