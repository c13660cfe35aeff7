"""remat vs the running torch's partitioner, side by side on the same joint graphs.

For each case, in one process: torch's `min_cut_rematerialization_partition`,
remat's drop-in (FX in -> FX out) and remat's engine alone (IR in -> result
out, as timed inside C++), each the median of --repeat runs on fresh copies
of the joint graph; then whether the two produce identical forward and
backward graphs. Speedups are ratios measured in the same run.

Then the scaling runs: the `remat` command on synthetic joint graphs of 10^4,
10^5 and 10^6 nodes (bench/synthetic.py), load time and engine time per node.
The issue's targets are computed from both and printed as a table.

    python bench/bench_partition.py                 # the full tables
    python bench/bench_partition.py --smoke         # tiny sizes (CI)
    python bench/bench_partition.py --write-docs    # also docs/performance.{md,json,svg}
    python bench/bench_partition.py --from-json docs/performance.json --write-docs

The raw rows are saved (docs/performance.json) before anything is plotted,
so a long run is never lost; the plot needs matplotlib (pip install matplotlib).
The scaling runs use $REMAT_BUILD_DIR/remat, else `remat` on PATH.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch._functorch.config as functorch_config  # noqa: E402
from torch._functorch import partitioners  # noqa: E402

import cases  # noqa: E402
import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
import synthetic  # noqa: E402


def graph_signature(gm: torch.fx.GraphModule) -> list[str]:
    """Node-by-node text (names, ops, targets, args): equal iff same graph."""
    return [n.format_node() for n in gm.graph.nodes]


def median_time(fn, repeat: int, prepare) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        arg = prepare()
        t = time.perf_counter()
        out = fn(arg)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


# inductor's FP8 activation quantization, quantizing every float32 saved
# value with scaling both ways: the rows marked [fp8].
FP8 = {"size_in_mb": 0, "allowed_dtypes": "torch.float32", "use_scaling": True}


def run_case(joint: cases.Joint, repeat: int, torch_repeat: int, budget: float | None,
             lazy: bool = True, partitioner: str = "min_cut", rewrite: str | None = None,
             fp8: bool = False, config: dict | None = None, label: str = "",
             deliberate: bool = False):
    """torch's and remat's `partitioner` ("min_cut" or "default") on copies of
    one joint graph, under torch config `config` (named `label` in the row).
    With `lazy`, code generation for the returned modules is deferred to
    their first call, as inside torch.compile
    (`_use_lazy_graph_module(dynamo_config.use_lazy_graph_module)`).
    `rewrite` names a post-cut rewrite of `cases.REWRITES` to turn on. With
    `fp8`, both run under inductor's activation_quantization_aten_pass (FP8).
    `deliberate`: graphs may differ by design (the ilp solver; README)."""
    import torch._inductor.config as inductor_config
    from torch.fx._lazy_graph_module import _use_lazy_graph_module

    if fp8:
        with inductor_config.patch(post_grad_fusion_options={"activation_quantization_aten_pass": FP8}):
            row = run_case(joint, repeat, torch_repeat, budget, lazy, partitioner, rewrite)
        row["graph"] += " [fp8]"
        return row
    kwargs = joint.kwargs
    if partitioner == "min_cut":
        theirs, ours = partitioners.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition
    else:
        theirs, ours = partitioners.default_partition, rt.default_partition
    patch = {} if budget is None else {"activation_memory_budget": budget}
    patch.update(config or {})
    context = contextlib.nullcontext()
    if rewrite is not None:
        joint, rewrite_config, context = cases.REWRITES[rewrite](joint)
        patch.update(rewrite_config)
    refused = None
    with joint.partition_context(), functorch_config.patch(patch), _use_lazy_graph_module(lazy), \
            context:
        t_torch, (tfw, tbw) = median_time(
            lambda gm: theirs(gm, None, **kwargs), torch_repeat, joint.copy)
        try:
            t_e2e, (rfw, rbw) = median_time(
                lambda gm: ours(gm, None, **kwargs), repeat, joint.copy)
            engine = []
            for _ in range(repeat):
                engine.append(rt.partition(joint.copy(), partitioner=partitioner,
                                           **kwargs).result["seconds"])
        except remat.UnsupportedError as e:
            # A documented refusal (docs/torch-releases.md "Where remat
            # refuses"): install() hands such a graph to torch's own
            # partitioner, so the row is torch's, and says so.
            refused = str(e)
    name = joint.name + ("" if budget is None else f" @budget {budget}")
    if rewrite is not None:
        name += f" @{rewrite}"
    if partitioner != "min_cut":
        name += f" [{partitioner}]"
    if label:
        name += f" [{label}]"
    if refused is not None:
        return {"graph": name, "nodes": joint.nodes, "torch": t_torch, "e2e": t_torch,
                "engine": t_torch, "identical": True, "refused": refused}
    same = (graph_signature(tfw) == graph_signature(rfw)
            and graph_signature(tbw) == graph_signature(rbw))
    row = {"graph": name, "nodes": joint.nodes, "torch": t_torch, "e2e": t_e2e,
           "engine": statistics.median(engine), "identical": same}
    if deliberate:
        row["deliberate"] = True
    return row


def format_table(rows) -> str:
    head = ("| graph | nodes | torch (s) | remat end-to-end (s) | remat engine (s) "
            "| speedup end-to-end | speedup engine | identical |")
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['graph']} | {r['nodes']} | {r['torch']:.4f} | refused (torch's "
                         f"partitioner runs) | - | - | - | - |")
            continue
        lines.append(
            f"| {r['graph']} | {r['nodes']} | {r['torch']:.4f} | {r['e2e']:.4f} | {r['engine']:.6f} "
            f"| {r['torch'] / r['e2e']:.1f}x | {r['torch'] / max(r['engine'], 1e-9):.0f}x "
            f"| {'yes' if r['identical'] else 'no (deliberate)' if r.get('deliberate') else 'NO'} |")
    return "\n".join(lines)


def remat_command() -> str | None:
    build = os.environ.get("REMAT_BUILD_DIR")
    if build and os.path.exists(os.path.join(build, "remat")):
        return os.path.join(build, "remat")
    return shutil.which("remat")


def run_scaling(sizes: list[int], repeat: int) -> list[dict]:
    """`remat partition -v` on synthetic graphs: median load and engine time."""
    exe = remat_command()
    if exe is None:
        print("[bench] scaling: no remat command (set REMAT_BUILD_DIR or install remat); "
              "skipped", file=sys.stderr)
        return []
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(scaling_row(exe, os.path.join(tmp, "joint.json"), n, repeat))
    return rows


def scaling_row(exe: str, path: str, n: int, repeat: int) -> dict:
    print(f"[bench] scaling: generating {n} nodes", file=sys.stderr, flush=True)
    synthetic.main(["--nodes", str(n), "-o", path])
    print(f"[bench] scaling: {n} nodes, partitioning", file=sys.stderr, flush=True)
    loads, engines, nodes = [], [], 0
    for _ in range(repeat):
        run = subprocess.run([exe, "partition", "-v", path], capture_output=True, text=True,
                             check=True)
        load = re.search(r"\((\d+) nodes\) in ([\d.]+) ms", run.stderr)
        engine = re.search(r"\(engine ([\d.]+) ms\)", run.stdout)
        nodes = int(load.group(1))
        loads.append(float(load.group(2)) / 1e3)
        engines.append(float(engine.group(1)) / 1e3)
    return {"size": n, "nodes": nodes, "runs": repeat, "load": statistics.median(loads),
            "engine": statistics.median(engines)}


def format_scaling(scaling) -> str:
    lines = ["| nodes | load (s) | partition, engine (s) | µs / node |", "|---|---|---|---|"]
    for r in scaling:
        lines.append(f"| {r['nodes']:,} | {r['load']:.3f} | {r['engine']:.4f} "
                     f"| {1e6 * r['engine'] / r['nodes']:.2f} |")
    return "\n".join(lines)


def targets(rows, scaling) -> list[tuple[str, str, bool]]:
    """The issue's targets, each (target, what this run measured, met)."""
    out = []
    rows = [r for r in rows if "refused" not in r]  # torch's own time: not remat's to meet
    big = [r for r in rows if r["nodes"] >= 10000]
    if big:
        eng = [r["torch"] / r["engine"] for r in big]
        e2e = [r["torch"] / r["e2e"] for r in big]
        out.append(("engine ≥ 200x torch on graphs of 10k+ nodes",
                    f"{min(eng):.0f}x – {max(eng):.0f}x", min(eng) >= 200))
        out.append(("end-to-end drop-in ≥ 10x torch on graphs of 10k+ nodes",
                    f"{min(e2e):.1f}x – {max(e2e):.1f}x", min(e2e) >= 10))
    if rows:
        worst = min(rows, key=lambda r: r["torch"] / r["e2e"])
        out.append(("end-to-end never slower than torch on any row (static or dynamic shapes, "
                    "min-cut or default)",
                    f"{worst['torch'] / worst['e2e']:.1f}x at worst (`{worst['graph']}`)",
                    worst["torch"] >= worst["e2e"]))
    small = [r for r in rows if r["nodes"] <= 200]
    if small:
        worst = min(r["torch"] / r["e2e"] for r in small)
        out.append(("end-to-end never slower than torch on ~100-node graphs",
                    f"{worst:.1f}x faster (slowest of {len(small)} graphs ≤ 200 nodes)", worst >= 1))
    plain = {r["graph"]: r for r in rows}
    ratios = [(r["engine"] / plain[r["graph"].split(" @")[0]]["engine"], r["graph"])
              for r in rows if " @budget" in r["graph"] and r["graph"].split(" @")[0] in plain]
    if ratios:
        worst = max(ratios)
        out.append(("engine under a memory budget ≤ 3x one plain min-cut",
                    f"at most {worst[0]:.1f}x (`{worst[1]}`)", worst[0] <= 3))
    # A post-cut rewrite must not cost the engine its lead: each rewrite row
    # against the same graph's plain min-cut.
    with_rewrite = [(r["engine"] / plain[r["graph"].split(" @")[0]]["engine"], r)
                    for r in rows if " @" in r["graph"] and " @budget" not in r["graph"]
                    and r["graph"].split(" @")[0] in plain]
    if with_rewrite:
        worst = max(with_rewrite, key=lambda x: x[0])
        least = min(with_rewrite, key=lambda x: x[1]["torch"] / x[1]["engine"])[1]
        out.append(("post-cut rewrites (offloading ...) keep the engine's lead: engine ≤ 2x one "
                    "plain min-cut, and faster than torch",
                    f"at most {worst[0]:.2f}x (`{worst[1]['graph']}`); engine "
                    f"{least['torch'] / least['engine']:.0f}x torch at least (`{least['graph']}`)",
                    worst[0] <= 2 and least["torch"] > least["engine"]))
    fp8 = [r for r in rows if r["graph"].endswith(" [fp8]")]
    if fp8:
        # The pass must not cost remat its lead: never slower than torch end
        # to end, the engine at least 200x torch (the bar of the big graphs).
        slowest = min(fp8, key=lambda r: r["torch"] / r["e2e"])
        engine = min(r["torch"] / max(r["engine"], 1e-9) for r in fp8)
        out.append(("with FP8 activation quantization: end-to-end never slower than torch, "
                    "engine ≥ 200x torch",
                    f"{slowest['torch'] / slowest['e2e']:.1f}x end to end at worst "
                    f"(`{slowest['graph']}`), engine ≥ {engine:.0f}x",
                    slowest["torch"] >= slowest["e2e"] and engine >= 200))
    chains = plain.get("parallel_chains_512")
    if chains:
        out.append(('"many parallel use chains" at 512 chains well under a second',
                    f"{chains['e2e']:.2f} s end to end, {1e3 * chains['engine']:.0f} ms engine",
                    chains["e2e"] < 0.5))
    ranged = [r for r in scaling if r["size"] >= 10000]
    if len(ranged) >= 2:
        per = [r["engine"] / r["nodes"] for r in ranged]
        spread = max(per) / min(per)
        out.append(("engine time per node within 2x from 10k to 10^6 nodes",
                    " → ".join(f"{1e6 * x:.2f}" for x in per) + f" µs/node ({spread:.2f}x)",
                    spread <= 2))
    if scaling and scaling[-1]["size"] >= 10**6:
        r = scaling[-1]
        out.append(("a 10^6-node graph partitioned by `remat partition` in < 2 s after loading, "
                    "loading the larger part",
                    f"{r['engine']:.2f} s partition after a {r['load']:.2f} s load",
                    r["engine"] < 2 and r["load"] > r["engine"]))
    return out


def format_targets(found) -> str:
    lines = ["| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {'met' if ok else '**not met**'} |" for t, m, ok in found]
    return "\n".join(lines)


def write_docs(rows, scaling, path: str) -> None:
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump({"rows": rows, "scaling": scaling}, f, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plain = [r for r in rows if "budget" not in r["graph"]]
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [r["nodes"] for r in plain]
    for key, label in (("torch", "torch 2.13"), ("e2e", "remat end-to-end"), ("engine", "remat engine")):
        ax.scatter(xs, [r[key] for r in plain], label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("joint graph nodes")
    ax.set_ylabel("partition time (s, median)")
    ax.set_title("min-cut partition time: torch vs remat")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    plot = os.path.join(os.path.dirname(path), "performance.svg")
    fig.savefig(plot)
    with open(path, "w") as f:
        f.write("# Performance\n\n"
                "Generated by `python bench/bench_partition.py --write-docs` on this project's\n"
                "2-core machine. Times are medians; speedups are ratios measured in the same\n"
                "run. *End-to-end* is the drop-in `partition_fn` (FX in, FX out), timed as\n"
                "torch.compile calls it (the returned modules' code is generated at first call,\n"
                "for both; `--eager-codegen` times it inside instead); *engine* is\n"
                "the C++ partitioner alone (IR in, result out). *identical* compares the\n"
                "forward and backward graphs node by node.\n\n")
        f.write(format_table(rows) + "\n\n![partition time](performance.svg)\n")
        f.write("\n## Scaling\n\n"
                "The `remat` command on synthetic joint graphs (`bench/synthetic.py`,\n"
                "residual-MLP shape, ~10 nodes per layer), medians of "
                f"{scaling[0]['runs'] if scaling else 0} runs of\n`remat partition -v` each:\n\n"
                + format_scaling(scaling) + "\n")
        f.write("\n## Targets (issue \"Performance\"), from the runs above\n\n"
                + format_targets(targets(rows, scaling)) + "\n")
        notes = os.path.join(os.path.dirname(path), "performance_notes.md")
        if os.path.exists(notes):  # hand-kept: targets, scaling, what is left
            with open(notes) as n:
                f.write("\n" + n.read())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="tiny graphs only (for CI)")
    p.add_argument("--only", nargs="*", help="case names to run")
    p.add_argument("--repeat", type=int, default=5, help="runs of remat per case")
    p.add_argument("--torch-repeat", type=int, default=3, help="runs of torch per case")
    p.add_argument("--budget", type=float, action="append", default=None,
                   help="also run the transformer cases under this memory budget "
                        "(default 0.5; none with --smoke)")
    p.add_argument("--write-docs", action="store_true", help="write docs/performance.md and the plot")
    p.add_argument("--rows-json", metavar="PATH",
                   help="also write the measured rows and scaling runs there, with the torch "
                        "version (bench/bench_releases.py collects one file per release)")
    p.add_argument("--from-json", help="re-render saved rows instead of measuring")
    p.add_argument("--eager-codegen", action="store_true",
                   help="generate the returned modules' code inside the timing (torch.compile "
                        "defers it to the first call; this measures a direct call instead)")
    p.add_argument("--scaling", type=int, nargs="*", default=None, metavar="NODES",
                   help="synthetic graph sizes for the remat-command scaling runs "
                        "(default 10000 100000 1000000; 1000 3000 with --smoke; none to skip)")
    p.add_argument("--scaling-repeat", type=int, default=None,
                   help="runs of the command per size (default 9; --repeat with --smoke)")
    a = p.parse_args(argv)
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "performance.md")
    if a.write_docs:
        try:
            import matplotlib  # noqa: F401  (checked first: runs take minutes)
        except ImportError:
            p.error("--write-docs needs matplotlib: pip install matplotlib")
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        rows, scaling = saved["rows"], saved["scaling"]
        print(format_table(rows) + "\n\n" + format_scaling(scaling) + "\n\n"
              + format_targets(targets(rows, scaling)))
        if a.write_docs:
            write_docs(rows, scaling, docs)
        return 0

    chosen = cases.SMOKE if a.smoke else cases.CASES
    if a.only:
        chosen = {k: v for k, v in {**cases.CASES, **cases.SMOKE}.items() if k in a.only}
    rows = []
    for name, build in chosen.items():
        print(f"[bench] {name}: capturing", file=sys.stderr, flush=True)
        joint = build()
        print(f"[bench] {name}: {joint.nodes} nodes, partitioning", file=sys.stderr, flush=True)
        lazy = not a.eager_codegen
        rows.append(run_case(joint, a.repeat, a.torch_repeat, None, lazy))
        if name in cases.BOTH_PARTITIONERS:
            rows.append(run_case(joint, a.repeat, a.torch_repeat, None, lazy, "default"))
        if name in cases.FP8:
            rows.append(run_case(joint, a.repeat, a.torch_repeat, None, lazy, fp8=True))
        budgets = a.budget if a.budget is not None else ([] if a.smoke else [0.5])
        for b in budgets:
            if name.startswith("transformer") and "dynamic" not in name:
                rows.append(run_case(joint, a.repeat, a.torch_repeat, b, lazy))
                # The ilp solver (exact in remat, HiGHS in torch: README).
                rows.append(run_case(joint, a.repeat, a.torch_repeat, b, lazy,
                                     config={"activation_memory_budget_solver": "ilp"},
                                     label="ilp", deliberate=True))
        if not a.smoke and name.startswith("transformer") and "dynamic" not in name:
            # Cross-rank sync on one process: torch and remat both return
            # before any collective; the row shows the check costs nothing.
            rows.append(run_case(joint, a.repeat, a.torch_repeat, None, lazy,
                                 config={"_sync_decision_cross_ranks": True}, label="sync"))
        for rewrite, partitioner in cases.REWRITE_ROWS.get(name, ()):
            rows.append(run_case(joint, a.repeat, a.torch_repeat, None, lazy, partitioner, rewrite))
    sizes = a.scaling if a.scaling is not None else (
        [1000, 3000] if a.smoke else [10000, 100000, 1000000])
    scaling_repeat = a.scaling_repeat or (a.repeat if a.smoke else 9)
    scaling = run_scaling(sizes, scaling_repeat)
    print(format_table(rows) + "\n\n" + format_scaling(scaling) + "\n\n"
          + format_targets(targets(rows, scaling)))
    if a.rows_json:
        with open(a.rows_json, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows, "scaling": scaling}, f, indent=1)
    if a.write_docs:
        write_docs(rows, scaling, docs)
    return 0 if all(r["identical"] or r.get("deliberate") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
