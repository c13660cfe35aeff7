"""remat: AOTAutograd's activation-rematerialization partitioner as a C++ engine.

Contract: `import remat` imports neither torch nor anything heavy. The engine
functions take and return format-v1 JSON (docs/format.md) as bytes, str or an
already-parsed dict; `remat.torch` converts FX graphs to and from that format.
Engine failures raise `RematError` subclasses (see remat.errors).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Union

from .errors import (
    DropInError,
    BudgetUnreachableError,
    InternalError,
    InvalidGraphError,
    InvalidOptionError,
    NoFiniteCutError,
    ParseError,
    RematError,
    RematIOError,
    UnsupportedError,
)

__all__ = [
    "RematError",
    "InvalidGraphError",
    "ParseError",
    "UnsupportedError",
    "InvalidOptionError",
    "RematIOError",
    "InternalError",
    "NoFiniteCutError",
    "DropInError",
    "BudgetUnreachableError",
    "partition",
    "partition_saving",
    "pareto",
    "plans",
    "peak_frontier",
    "roundtrip",
    "info",
    "version",
    "torch_releases",
    "pareto_svg",
    "report",
    "no_cut_report",
    "write_file",
]

JsonLike = Union[bytes, bytearray, memoryview, str, Mapping[str, Any]]


def _ext():
    # Imported on first use so the pure-Python parts (remat.torch export and
    # import) work in a tree where the extension is not built yet.
    from . import _remat

    return _remat


def _to_bytes(doc: JsonLike) -> bytes:
    if isinstance(doc, bytes):
        return doc
    if isinstance(doc, (bytearray, memoryview)):
        return bytes(doc)
    if isinstance(doc, str):
        return doc.encode()
    import orjson

    return orjson.dumps(doc)


def _warn_unmatched_ops(joint: bytes, options: bytes) -> None:
    """An "ops" key that names no operator of the graph does nothing: say
    so, as the command line does for an options file (a warning, not an
    error: one options object may serve several graphs)."""
    if b'"ops"' not in options:
        return
    import warnings

    for key in _ext().unmatched_op_keys(joint, options):
        warnings.warn(f"remat: options \"ops\" key {key!r} matches no operator of the graph, "
                      "so it does nothing (categories are keyed by packet, e.g. 'aten.transpose')",
                      UserWarning, stacklevel=3)


def version() -> str:
    """The engine's version string."""
    return _ext().version()


def torch_releases() -> dict:
    """The torch releases remat reproduces: {"oldest": "2.11", "newest":
    "2.15", "switches": [(name, since, where, what, test), ...]}, every
    behavioral difference between them: its name, the release that made it,
    the torch function it lives in, what it changes and its parity test
    (docs/torch-releases.md)."""
    return _ext().torch_releases()


def __getattr__(name: str) -> Any:
    # remat.__version__ is the engine's: the version is written once, in
    # CMakeLists.txt's project() (remat/version.h and the wheel's metadata
    # are generated from it), so it is read from the extension on access.
    if name == "__version__":
        return version()
    raise AttributeError(f"module 'remat' has no attribute {name!r}")


def partition(
    joint: JsonLike,
    options: JsonLike | None = None,
    partitioner: str = "min_cut",
    *,
    as_json: bool = True,
    knapsack_solver: Callable[[list, float, list], tuple] | None = None,
    runtime_estimator: Callable[[int], float] | None = None,
    offload_node_runtime: Callable[[int], float] | None = None,
    size_check: Callable[[int, bool], bool | None] | None = None,
    rank_group: Any = None,
) -> bytes | dict:
    """Partitions a format-v1 joint graph; returns the partition-result document.

    `options` is an object of PartitionOptions fields ({"activation_memory_budget": 0.5}).
    `partitioner` is "min_cut" or "default". Returns bytes, or a dict when
    `as_json` is False.

    `knapsack_solver` and `runtime_estimator` replace the memory budget's
    solver and estimator (they select the "custom" ones):
    ``knapsack_solver(memory, max_memory, banned_ids) -> (saved, recomputed)``
    gets the items' normalized memories, the budget and the items' joint node
    ids (all in item order) and returns item indices, of which only
    `recomputed` is used (out-of-range ones are skipped);
    ``runtime_estimator(joint_id) -> float`` prices one item. Exceptions they
    raise propagate unchanged. `remat.torch` builds them from torch's
    CustomKnapsackSolver / CustomRuntimeEstimator.

    ``offload_node_runtime(joint_id) -> float`` gives the milliseconds
    activation_reload_prefetch credits a backward node with (torch benchmarks
    compute nodes there; 0 for the others); the engine asks for it only when
    that prefetch runs.

    `size_check(joint_id, guard) -> bool | None` answers FP8 activation
    quantization's question about a tensor whose size is symbolic (options
    "activation_quantization"): whether its size in MB reaches size_in_mb,
    decided with a guard (`guard` True: torch's bool() on the SymBool) or only
    if provable (False: None when unknown). Without it the engine uses the
    size hints, resp. knows nothing. `remat.torch` asks torch's ShapeEnv.

    `rank_group` lets ranks agree on one decision when the option
    ``sync_decision_cross_ranks`` is set (torch's
    ``_sync_decision_cross_ranks``; remat/sync.h has the protocol): an object
    with ``rank()``, ``world_size()``, ``all_gather(obj) -> list`` (one str or
    list of str per rank), ``all_reduce_max(list[int]) -> list[int]``,
    ``target_repr(qualified_name) -> str`` (Python's str() of a callable
    target, which torch up to 2.13 hashes),
    ``target_qualified_name(qualified_name) -> str`` (FX's qualified name of
    it, which torch 2.14 on hashes) and ``agreed(picked_rank, payload)``.
    `remat.torch` builds one on torch.distributed. Exceptions its methods
    raise propagate unchanged.
    """
    joint, options = _to_bytes(joint), _to_bytes(options or {})
    _warn_unmatched_ops(joint, options)
    out = _ext().partition(joint, options, partitioner,
                           knapsack_solver, runtime_estimator, offload_node_runtime, size_check,
                           rank_group)
    if as_json:
        return out
    import orjson

    return orjson.loads(out)


def partition_saving(
    joint: JsonLike,
    saved: list[str],
    options: JsonLike | None = None,
    *,
    as_json: bool = True,
    knapsack_solver: Callable[[list, float, list], tuple] | None = None,
    runtime_estimator: Callable[[int], float] | None = None,
) -> bytes | dict:
    """The plan that saves exactly `saved`: a plan replay, not a partitioner.

    `saved` names joint-graph nodes the forward can compute, in the order
    torch would pass them on; the min-cut pipeline builds the forward and
    backward that save them (what nothing reads is pruned, what the backward
    needs and is not saved is recomputed) and simulates the step. Returns
    partition()'s result document. For oracles and tests that enumerate
    plans (tests/python/test_optimizer_oracle.py); `options` as for
    partition(), without peak_memory_budget (InvalidOptionError: that would
    search for a saved set). A name that is no node of the graph, or a node
    the forward cannot compute or DCE/CSE removed, raises InvalidOptionError
    naming it.
    """
    if isinstance(saved, (str, bytes)):
        raise TypeError("partition_saving: `saved` is a list of node names, not one name")
    joint, options = _to_bytes(joint), _to_bytes(options or {})
    _warn_unmatched_ops(joint, options)
    out = _ext().partition_saving(joint, options, [str(name) for name in saved],
                                  knapsack_solver, runtime_estimator)
    if as_json:
        return out
    import orjson

    return orjson.loads(out)


def pareto(
    joint: JsonLike,
    options: JsonLike | None = None,
    *,
    resolution: float = 1e-3,
    budgets: list[float] | None = None,
    knapsack_solver: Callable[[list, float, list], tuple] | None = None,
    runtime_estimator: Callable[[int], float] | None = None,
) -> list[tuple[float, float, float]]:
    """The memory-budget Pareto frontier of a format-v1 joint graph.

    Returns torch's `visualize_memory_budget_pareto` points as
    (budget, recompute_runtime, memory_ratio) tuples, sorted, duplicates
    included; `options` as for partition() (the knapsack solver and runtime
    estimator come from it). With `budgets`, evaluates exactly those budgets
    (torch's estimate_for_budget) instead of bisecting. `knapsack_solver` and
    `runtime_estimator` as for partition().
    """
    joint, options = _to_bytes(joint), _to_bytes(options or {})
    _warn_unmatched_ops(joint, options)
    points = _ext().pareto(joint, options, resolution,
                           [float(b) for b in budgets or ()], knapsack_solver,
                           runtime_estimator)
    return [tuple(p) for p in points]


def plans(
    joint: JsonLike,
    options: JsonLike | None = None,
    *,
    budgets: list[float] | None = None,
    knapsack_solver: Callable[[list, float, list], tuple] | None = None,
    runtime_estimator: Callable[[int], float] | None = None,
) -> list[dict]:
    """torch's activation-budget plans for a format-v1 joint graph, each
    built and simulated as the min-cut partitioner builds its own.

    Returns one dict per distinct plan as the budget goes from 1 to 0 (the
    runtime-optimized cut, the two aggressive tiers, the knapsack at each of
    `budgets`, by default the ones `remat report` uses (0.9 down to 0.1),
    then budget 0): {"label",
    "peak_bytes", "recompute_runtime", "saved_values"}. Each plan is one
    build of the whole step: give few budgets on big graphs. Raises
    UnsupportedError when the backward needs nothing from the forward.
    """
    chosen = None if budgets is None else [float(b) for b in budgets]
    joint, options = _to_bytes(joint), _to_bytes(options or {})
    _warn_unmatched_ops(joint, options)
    rows = _ext().plans(joint, options, chosen, knapsack_solver,
                        runtime_estimator)
    return [{"label": label, "peak_bytes": peak, "recompute_runtime": runtime,
             "saved_values": saved} for label, peak, runtime, saved in rows]


def peak_frontier(
    joint: JsonLike,
    options: JsonLike | None = None,
    points: int = 8,
    *,
    knapsack_solver: Callable[[list, float, list], tuple] | None = None,
    runtime_estimator: Callable[[int], float] | None = None,
) -> list[dict]:
    """remat's own trade-off between peak memory and recompute: the plan its
    optimizer returns at each of `points` (>= 2) peak limits, spaced evenly
    from the runtime-optimized plan's peak down to the smallest peak the
    optimizer reaches (what `remat pareto --peak` draws beside plans()).

    `options["peak_search"]` chooses the optimizer: "fast" (the default) or
    "exact" ("torch_plans" raises InvalidOptionError; that search is torch's
    plans). Each plan is what partition() returns with
    peak_memory_budget set to its limit. Returns one dict per distinct plan,
    sorted by peak: {"label" ("exact <= 20.31 KiB"), "peak_bytes",
    "recompute_runtime", "saved_values", "limit_bytes"}. Raises
    UnsupportedError when the backward needs nothing from the forward, and
    BudgetUnreachableError when no valid plan exists.
    """
    joint, options = _to_bytes(joint), _to_bytes(options or {})
    _warn_unmatched_ops(joint, options)
    rows = _ext().peak_frontier(joint, options, int(points),
                                knapsack_solver, runtime_estimator)
    return [{"label": label, "peak_bytes": peak, "recompute_runtime": runtime,
             "saved_values": saved, "limit_bytes": limit}
            for label, peak, runtime, saved, limit in rows]


def roundtrip(joint: JsonLike) -> bytes:
    """Reads a joint graph into the engine's IR and writes it back out."""
    return _ext().roundtrip(_to_bytes(joint))


def info(joint: JsonLike) -> dict:
    """What a joint graph holds, as the engine sees it (what `remat info` prints).

    Keys: nodes, placeholder, call_function, get_attr, output (counts by
    kind), ops (distinct), tensors, num_fwd_outputs, static_lifetime_inputs,
    op_overrides (the graph's own category overrides), categories
    ({category: call_function nodes, ..., "none": ...}), forward / backward /
    unclaimed (torch's classify_nodes split; "split_error" instead when it
    refuses the graph), activation_bytes and unsized (call_function nodes
    without a size).
    """
    return _ext().info(_to_bytes(joint))


def pareto_svg(points) -> str:
    """The frontier [(budget, recompute_runtime, memory_ratio), ...] (pareto()'s
    points) as remat's standalone SVG chart (what `remat pareto -o` writes)."""
    return _ext().pareto_svg([tuple(float(x) for x in p) for p in points])


def report(
    joint: JsonLike,
    result: JsonLike,
    *,
    plans: list[dict] | None = None,
    pareto: list | None = None,
    title: str = "",
    pareto_note: str = "",
) -> str:
    """One partition as a self-contained HTML page (what `remat report` writes).

    `result` is partition()'s document for `joint` (fields added to it, such as
    a memory simulation's "memory", are shown); `plans` torch's budget plans
    from plans(), drawn as peak memory against recompute beside this
    partition's own plan; `pareto` torch's frontier from pareto(). Without
    either, `pareto_note` says why there is none.
    """
    points = [tuple(float(x) for x in p) for p in pareto or ()]
    plan_rows = [(str(p["label"]), int(p["peak_bytes"]), float(p["recompute_runtime"]),
                  int(p["saved_values"])) for p in plans or ()]
    if not pareto and not plans and not pareto_note:
        pareto_note = "No frontier was computed for this graph."
    return _ext().report(_to_bytes(joint), _to_bytes(result), points, title, pareto_note,
                         plan_rows)


def no_cut_report(joint: JsonLike, error: NoFiniteCutError, *, title: str = "") -> str:
    """The self-contained HTML page of a graph with no finite cut (what
    `remat report` writes for one): `error` is the NoFiniteCutError that
    partition() raised for `joint`; the page gives its diagnosis, the
    conflicting path and the nodes on it."""
    if not isinstance(error, NoFiniteCutError):
        raise TypeError("no_cut_report: expected a remat.NoFiniteCutError, "
                        f"got {type(error).__name__}")
    return _ext().no_cut_report(_to_bytes(joint), str(error), error.explanation or "",
                                error.dot or "", error.edge_list or "", title)


def write_file(path: Union[str, bytes, os.PathLike], data: Union[str, bytes]) -> None:
    """Writes `data` (str as UTF-8) to `path` as the remat command writes its
    outputs (docs/format.md "Files"): a regular file is replaced atomically
    and keeps its permission bits, a symbolic link is followed to its
    target, a FIFO or character device is written into, never replaced, and
    anything else is refused. A failure raises RematIOError naming the path
    and leaves no partial or temporary file."""
    raw_path = os.fsencode(path)
    if isinstance(data, str):
        data = data.encode()
    _ext().write_file(raw_path, bytes(data))
