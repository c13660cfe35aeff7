"""What torch's partitioner tells its users, told for remat's partitions.

Contract:
  * Logging parity: the lines torch 2.13's partitioner logs (the
    AOT_PARTITIONER_DEBUG lines, the ban rules' info/debug lines, the
    dynamic_memory_budget_dp warning, the quantization pass's skipped static
    inputs) go through the logger
    "torch._functorch.partitioners" with torch's format strings, so
    TORCH_LOGS / logging settings select them as before. The engine records
    them (PartitionOptions.trace) only when someone listens.
  * Structured-trace parity: every trace_structured artifact torch's
    partitioner emits has a twin here with the same name and an equivalent
    payload: min_cut_failed_fx_graph / _edge_list / _svg (a graph with no
    finite cut), min_cut_information (a memory budget that reached the
    knapsack, under AOT_PARTITIONER_DEBUG), the FP8 activation-quantization
    pass's before/after graphs (from the engine's snapshots, at the point of
    extraction where torch logs them), and aot_joint_graph_sync_decision_
    cross_ranks (written by _ranks when ranks agree). Plus remat's own
    "remat_partition" artifact per partition.
  * Files where torch writes them: min_cut_failed_graph.txt and
    min_cut_failed.svg in the working directory on a failed cut; the
    memory_budget_pareto_*.svg frontier (remat's own SVG writer) for
    config.visualize_memory_budget_pareto.
  * REMAT_REPORT_DIR=dir writes one HTML report per partitioned graph, and
    one diagnosis page per graph with no finite cut (what `remat report`
    writes for such a graph).
  * Every file goes through remat.write_file, the command line's writer
    (docs/format.md "Files"): atomic, links followed, devices written into.
Nothing here changes a partition: it only reads the engine's result.
"""

from __future__ import annotations

import json
import logging
import operator
import os
import shutil
import subprocess
from collections import defaultdict
from typing import Any, Callable, Optional

import torch
import torch.fx as fx

import remat

from . import _internals, _release

# torch's partitioner logger: TORCH_LOGS and logging config address it by name.
log = logging.getLogger("torch._functorch.partitioners")

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


# --- when to ask the engine for its story ---------------------------------------

def partitioner_debug() -> bool:
    """torch's AOT_PARTITIONER_DEBUG, read where torch reads it (a module
    global set from config.debug_partitioner at import; tests patch it)."""
    return bool(getattr(_internals.partitioners(), "AOT_PARTITIONER_DEBUG", False))


def structured_trace_enabled() -> bool:
    """Whether TORCH_TRACE (or any handler) listens to trace_structured."""
    return bool(_internals.logging_internal().trace_log.handlers)


def report_dir() -> Optional[str]:
    return os.environ.get("REMAT_REPORT_DIR") or None


def request(opts: dict) -> dict:
    """`opts` plus the engine options that record what the consumers above
    need: the trace when anyone listens, the Pareto sweep when torch's
    config asks for it. Costs nothing when nobody does."""
    config = _internals.functorch_config()
    out = dict(opts)
    # Graph copies for the FP8 quantization pass's artifacts, only when a
    # structured trace will print them.
    if opts.get("activation_quantization") is not None and structured_trace_enabled():
        out["keep_snapshots"] = True
    wants_trace = (log.isEnabledFor(logging.WARNING) and _may_warn(opts)) or \
        log.isEnabledFor(logging.INFO) or partitioner_debug() or \
        structured_trace_enabled() or report_dir() is not None
    if wants_trace:
        out["trace"] = True
    if _internals.config_value(config, "visualize_memory_budget_pareto"):
        out["visualize_memory_budget_pareto"] = True
    return out


def _may_warn(opts: dict) -> bool:
    return opts.get("activation_memory_budget_solver") == "dynamic_memory_budget_dp"


# --- structured trace ---------------------------------------------------------------

def trace_artifact(name: str, encoding: str, payload_fn) -> None:
    """One trace_structured artifact, as torch's partitioner emits them."""
    _internals.torch_logging().trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": name, "encoding": encoding},
        payload_fn=payload_fn,
    )


def _readable(module: fx.GraphModule) -> str:
    return module.print_readable(print_output=False, include_stride=True, include_device=True)


def trace_activation_quantization(when: str, which: str, module: fx.GraphModule) -> None:
    """torch's {before,after}_activation_quantization_{fwd,bwd}_aten_pass
    artifacts: `when` is "before" or "after", `which` "fwd" or "bwd". The FP8
    activation-quantization rewrite calls it for each graph the engine kept
    (remat.torch._quantization.trace_artifacts)."""
    if when not in ("before", "after") or which not in ("fwd", "bwd"):
        raise ValueError(f"activation quantization artifact: bad stage {when!r}/{which!r}")
    trace_artifact(f"{when}_activation_quantization_{which}_aten_pass", "string",
                   lambda: _readable(module))


# --- after a partition ----------------------------------------------------------------

def after_partition(joint_module: fx.GraphModule, doc: bytes, opts: dict, result: dict,
                    fw: fx.GraphModule, bw: fx.GraphModule,
                    extraction: Optional[Callable[[], None]] = None) -> None:
    """Logs, artifacts, files and reports for one finished partition.

    `extraction` emits what torch logs while it extracts the two graphs (the
    FP8 quantization pass's artifacts): after the decision's logs and
    artifacts, before the final debug lines, as in torch."""
    trace = result.get("trace") or {}
    debug = partitioner_debug()
    replay_log(trace.get("log", ()), debug)
    if debug:
        for record in trace.get("knapsack", ()):
            _min_cut_information(joint_module, result, record, opts)
    if trace.get("pareto"):
        write_pareto_svg(trace["pareto"])
    if extraction is not None:
        extraction()
    if debug and result.get("partitioner") == "min_cut":
        _final_debug_lines(result, trace, fw, bw)
    if structured_trace_enabled():
        trace_artifact("remat_partition", "json", lambda: json.dumps(own_artifact(result)))
    directory = report_dir()
    if directory is not None:
        write_report(directory, doc, result, opts)


def replay_log(records, debug: bool) -> None:
    """The engine's recorded lines, through torch's logger with torch's text."""
    for r in records:
        if r.get("debug_only") and not debug:
            continue
        level = _LEVELS[r["level"]]
        if log.isEnabledFor(level):
            log.log(level, r["format"], *r["args"])


def own_artifact(result: dict) -> dict:
    """remat's own per-partition artifact: decisions, stage times, the budget
    step, and the simulated peak memory when the result has one."""
    trace = result.get("trace") or {}
    out = {
        "partitioner": result.get("partitioner"),
        "saved_values": result.get("saved_values", []),
        "saved_sym_nodes": result.get("saved_sym_nodes", []),
        "saved_opaque_nodes": result.get("saved_opaque_nodes", []),
        "decisions": result.get("decisions", {}),
        "seconds": result.get("seconds"),
        "stages": result.get("stages", {}),
        "memory_budget": trace.get("memory_budget"),
        "budget_step": trace.get("budget_step"),
    }
    memory = result.get("memory")
    if isinstance(memory, dict):
        out["memory"] = memory
        if "peak_bytes" in memory:
            out["peak_bytes"] = memory["peak_bytes"]
    return out


def _final_debug_lines(result: dict, trace: dict, fw: fx.GraphModule, bw: fx.GraphModule) -> None:
    """The lines min_cut_rematerialization_partition logs last under
    AOT_PARTITIONER_DEBUG: saved sizes and what was rematerialized."""
    sizes = trace.get("saved_bytes", [])
    names = result.get("saved_values", [])
    sorted_sizes = sorted(zip(sizes, names))
    log.info("Theoretical Activations Stored: %.2f GB", sum(sizes) / 1e9)
    log.info("Theoretical Per Activation Storage Sizes: %s", sorted_sizes)
    fw_names = {n.name for n in fw.graph.nodes if n.op == "call_function"}
    bw_names = {n.name for n in bw.graph.nodes if n.op == "call_function"}
    remat_names = fw_names & bw_names
    counts: dict[str, int] = defaultdict(int)
    for node in fw.graph.nodes:
        if node.name in remat_names and hasattr(node.target, "_overloadpacket"):
            counts[str(node.target._overloadpacket)] += 1
    log.info("# remat/fw/bw: %d/%d/%d", len(remat_names), len(fw_names), len(bw_names))
    log.info("Count of Ops Rematerialized: %s",
             sorted(counts.items(), key=operator.itemgetter(1), reverse=True))


def _prepared_nodes(joint_module: fx.GraphModule, result: dict):
    """The nodes of the graph the decision ran on (DCE'd and CSE'd, as torch's
    joint_graph at that point) as (fx node, its input names) pairs: the joint
    nodes not removed, inputs redirected to the node CSE merged them into."""
    decisions = result.get("decisions", {})
    survivor = {name: d["merged_into"] for name, d in decisions.items() if "merged_into" in d}
    out = []
    for node in joint_module.graph.nodes:
        if decisions.get(node.name, {}).get("where") == "removed":
            continue
        inputs: list[str] = []
        for inp in node.all_input_nodes:
            name = survivor.get(inp.name, inp.name)
            if name not in inputs:
                inputs.append(name)
        out.append((node, inputs))
    return out


def _as_torch_runtime(x: float, estimator: Any) -> Any:
    # torch's "flops" and "testing" estimators return ints: keep the JSON alike.
    if estimator in ("flops", "testing") and float(x).is_integer():
        return int(x)
    return x


def _min_cut_information(joint_module: fx.GraphModule, result: dict, k: dict, opts: dict) -> None:
    """torch's min_cut_information artifact for one knapsack call, and the
    copy torch keeps on the graph for AOTAutograd's cache replay."""
    estimator = opts.get("activation_memory_budget_runtime_estimator", "flops")
    runtimes = [_as_torch_runtime(x, estimator) for x in k["item_runtime"]]
    index = {name: i for i, name in enumerate(k["items"])}
    saved, recomputed = set(k["saved_items"]), set(k["recomputed_items"])
    nodes = _prepared_nodes(joint_module, result)
    info: dict[str, Any] = {}
    edges = []
    for i, (node, inputs) in enumerate(nodes):
        tensor_meta = node.meta.get("tensor_meta")
        shape = getattr(tensor_meta, "shape", []) if tensor_meta else []
        entry: dict[str, Any] = {
            "index": i,
            "name": node.name,
            "is_recomputable_candidate": node.name in index,
            "target": str(node.target),
            "shape": str(shape),
            "input_arguments": inputs,
            "stack_trace": node.meta.get("stack_trace", ""),
        }
        if node.name in index:
            idx = index[node.name]
            entry["recomputable_candidate_info"] = {
                "recomputable_node_idx": idx,
                "memory": k["item_bytes"][idx],
                "runtime": runtimes[idx],
                "is_saved": idx in saved,
                "is_recomputed": idx in recomputed,
            }
        info[node.name] = entry
        edges.extend((name, node.name) for name in inputs)
    payload = {
        "Joint Graph Size": len(nodes),
        "Joint Graph Edges": {"Total": len(edges), "Edges": edges},
        "Joint Graph Node Information": info,
        "Recomputable Banned Nodes Order": k["items"],
        "Expected Runtime": k["expected_runtime"],
        "Knapsack Saved Nodes": k["saved_items"],
        "Knapsack Recomputed Nodes": k["recomputed_items"],
        "Absolute Memories": k["item_bytes"],
        "Knapsack Input Memories": k["item_memory"],
        "Knapsack Input Runtimes": runtimes,
        "Min Cut Solution Saved Values": k["saved_values"],
    }
    if not _release.behaves("min_cut_information_payload"):
        # torch 2.11 and 2.12: these eleven keys, and nothing kept on the graph.
        trace_artifact("min_cut_information", "json", lambda: json.dumps(payload))
        return
    # 2.13 on: the budget and the activation sizes of the min-cut tiers, and
    # the text kept on the graph for AOTAutograd's cache to replay.
    payload.update({
        "Memory Budget": k["memory_budget"],
        "Min Activation Size (GB)": k["min_act_size"],
        "Max Activation Size (GB)": k["max_act_size"],
        "Saved Values Activation Size (GB)": k["saved_act_size"],
        "More Aggressive Saved Values Mem Ratio": k["more_aggressive_ratio"],
        "Aggressive Recomputation Saved Values Mem Ratio": k["aggressive_ratio"],
    })
    text = json.dumps(payload)
    joint_module.graph._min_cut_info_str = text  # type: ignore[attr-defined]
    trace_artifact("min_cut_information", "json", lambda: text)


# --- the Pareto frontier ------------------------------------------------------------

def pareto_svg_path() -> str:
    """Where torch saves its frontier plot: config.memory_budget_pareto_dir
    (created) or the working directory, named after the graph being compiled."""
    config = _internals.functorch_config()
    get_aot_graph_name = _internals.aot_logging().get_aot_graph_name
    directory = os.getcwd()
    if config.memory_budget_pareto_dir is not None:
        directory = config.memory_budget_pareto_dir
        os.makedirs(directory, exist_ok=True)
    rank = ""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank = f"_rank_{torch.distributed.get_rank()}"
    return os.path.join(directory, f"memory_budget_pareto{rank}_{get_aot_graph_name()}.svg")


def write_pareto_svg(points) -> str:
    """Draws the frontier with remat's SVG writer where torch saves its plot."""
    path = pareto_svg_path()
    remat.write_file(path, remat.pareto_svg([tuple(p) for p in points]))
    log.warning("Generated Pareto frontier curve at %s", path)
    return path


# --- a graph with no finite cut -------------------------------------------------------

def _unique_path(base: str, ext: str) -> str:
    """torch's naming: base.ext, else base_1.ext, base_2.ext, ... A name a
    dangling symlink holds is taken too (torch would write through it)."""
    path = f"{base}{ext}"
    counter = 0
    while os.path.lexists(path):
        counter += 1
        path = f"{base}_{counter}{ext}"
    return path


def render_dot_svg(dot: str) -> Optional[str]:
    """Graphviz's `dot -Tsvg` of `dot`, or None when graphviz is missing or fails."""
    exe = shutil.which("dot")
    if exe is None:
        log.info("Install graphviz (its `dot` command) to visualize the min-cut graph")
        return None
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 and proc.stdout else None


def on_no_finite_cut(err: remat.NoFiniteCutError, joint_module: fx.GraphModule,
                     doc: Optional[bytes] = None) -> remat.NoFiniteCutError:
    """What torch does when its min-cut is unbounded: the FX graph, the edge
    list and the SVG to the structured trace, the graph and SVG to local
    files. Returns the error with those files (and tlparse's hint, when
    tracing) named at the end of its message, as torch's. With
    REMAT_REPORT_DIR set and the exported graph `doc`, also the diagnosis
    page, as `remat report` writes it (its path ends the message)."""
    structured = structured_trace_enabled()
    fx_text = _readable(joint_module)
    trace_artifact("min_cut_failed_fx_graph", "string", lambda: fx_text)
    try:
        graph_file = _unique_path("min_cut_failed_graph", ".txt")
        remat.write_file(graph_file, fx_text)
    except OSError as e:
        graph_file = f"(failed to write: {e})"
    trace_artifact("min_cut_failed_edge_list", "string", lambda: err.edge_list)
    svg = render_dot_svg(err.dot) if err.dot else None
    svg_file = None
    if svg:
        trace_artifact("min_cut_failed_svg", "string", lambda: svg)
        try:
            svg_file = _unique_path("min_cut_failed", ".svg")
            remat.write_file(svg_file, svg)
        except OSError:
            svg_file = None
    message = str(err).rstrip("\n") + "\n"
    message += f"FX graph dump: {graph_file}\n"
    if svg_file:
        message += f"Min-cut graph visualization: {svg_file}\n"
    if structured:
        message += ("[Production debugging: Use tlparse to extract debug artifacts "
                    "(min_cut_failed_fx_graph, min_cut_failed_edge_list, min_cut_failed_svg)]\n")
    directory = report_dir()
    if directory is not None and doc is not None:
        message += f"remat report: {_write_no_cut_report(directory, doc, err)}\n"
    return remat.NoFiniteCutError(message, err.explanation, err.dot, err.edge_list)


def _write_no_cut_report(directory: str, doc: bytes, err: remat.NoFiniteCutError) -> str:
    """The diagnosis page of a graph with no finite cut in `directory`; its
    path, or why it could not be written (the error matters more than the page)."""
    title = _internals.aot_logging().get_aot_graph_name()
    try:
        html = remat.no_cut_report(doc, err, title=title)
        path = _report_path(directory, title)
        remat.write_file(path, html)
    except (remat.RematError, OSError) as e:
        log.warning("remat: cannot write the diagnosis page in %s: %s", directory, e)
        return f"(failed to write: {e})"
    log.info("remat: wrote the diagnosis of the failed cut to %s", path)
    return path


# --- HTML reports ---------------------------------------------------------------------

_report_counter = [0]


def write_report(directory: str, doc: bytes, result: dict, opts: dict) -> str:
    """One self-contained HTML report of this partition in `directory`,
    named after the graph being compiled (and numbered, never overwriting)."""
    title = _internals.aot_logging().get_aot_graph_name()
    plans = None
    if result.get("partitioner") == "min_cut":
        try:
            engine_opts = {k: v for k, v in opts.items()
                           if k not in ("trace", "visualize_memory_budget_pareto")}
            plans = remat.plans(doc, engine_opts)
        except remat.RematError:
            plans = None  # no trade-off on this graph: the report says so
    note = "" if plans else ("The default partitioner has no memory budget."
                             if result.get("partitioner") != "min_cut"
                             else "No trade-off on this graph: every budget partitions alike.")
    html = remat.report(doc, result, plans=plans, title=title, pareto_note=note)
    path = _report_path(directory, title)
    remat.write_file(path, html)
    log.info("remat: wrote the partition report %s", path)
    return path


def _report_path(directory: str, title: str) -> str:
    """A new page in `directory` (created), named after the graph, numbered
    rather than overwriting."""
    os.makedirs(directory, exist_ok=True)
    name = "".join(c if c.isalnum() or c in "._-" else "_" for c in title)
    return _unique_path(os.path.join(directory, f"remat_report_{name}"), ".html")
