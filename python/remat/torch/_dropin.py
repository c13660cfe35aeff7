"""Drop-in partition functions for torch.compile / aot_autograd, and install().

Contract:
  * `min_cut_rematerialization_partition` and `default_partition` take
    torch's signatures and return the (forward, backward) GraphModules the
    running torch's functions would (that release's decisions: _release):
    the joint graph is exported once, partitioned in C++ and the result
    imported back. Under a release remat does not reproduce they raise
    UnsupportedError naming the supported range (unless the user opted in).
  * Options come from `torch._functorch.config` at call time, plus the runtime
    facts torch itself reads (tracing context, inductor's fallback_random,
    torch.distributed) and inductor's activation_quantization_aten_pass, so an
    existing configuration keeps working. What torch's FP8 quantization pass
    does besides rewriting the graphs (counters, meta marks, trace
    artifacts, guards on symbolic sizes) is `_quantization`'s.
  * Like torch, the partitioners leave their mark on the joint graph: nodes
    forced to MUST_SAVE get that recompute tag in their meta, the min-cut
    with config.cse numbers meta["mutation_region_id"] (torch's CSE pass),
    and from 2.15 the primal placeholders get meta["is_static_input"].
  * What the drop-in stamps on the graphs and the trace per release (output
    stack traces, autograd_backward marks, is_static_input, the
    min_cut_information payload) follows the release switches of the very
    options the engine partitions with (_release.following), "torch_switches"
    included.
  * Logs, structured-trace artifacts, debug files and reports are torch's
    (see _trace): the same logger, artifact names and file names.
  * `install()` makes torch.compile (inductor and aot_eager backends) and
    aot_autograd's default use them; `uninstall()` restores torch's functions.
  * With config._sync_decision_cross_ranks under torch.distributed, the
    engine agrees with the other ranks through `_ranks.TorchRankGroup` (the
    same collectives as torch's); once it has talked to them, a later failure
    is raised even under install()'s fallback (torch's partitioner would
    repeat the collectives on this rank alone).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import threading
import warnings
from typing import Any, Callable, Optional

import torch
import torch.fx as fx

import remat
from . import _custom, _internals, _offload, _quantization, _ranks, _release, _trace
from ._fx_to_json import export_joint_graph
from ._json_to_fx import import_own_result, stamp_mutation_regions, stamp_static_inputs
from ._memory import get_backward_order, get_memory_model, get_peak_memory_budget, get_peak_search

log = logging.getLogger(__name__)

# Set on a RematError raised after this rank agreed with the others on a
# decision: install()'s fallback must not hand the graph to torch then.
NO_FALLBACK = "_remat_no_fallback"

# PartitionOptions fields read straight from torch._functorch.config.
_CONFIG_FIELDS = (
    "cse",
    "unsafe_allow_optimization_of_collectives",
    "recompute_views",
    "max_dist_from_bw",
    "ban_recompute_used_far_apart",
    "ban_recompute_long_fusible_chains",
    "ban_recompute_materialized_backward",
    "ban_recompute_not_in_allowlist",
    "ban_recompute_reductions",
    "aggressive_recomputation",
    "treat_parameters_as_free_to_save",
    "is_non_builtin_to_include",
    "unsafe_treat_script_objects_as_zero_size",
    "activation_memory_budget",
    "activation_memory_budget_require_full_coverage",
)


# Flags some supported releases lack, with the behavior those releases have
# without them.
_FLAG_DEFAULTS = {
    "unsafe_treat_script_objects_as_zero_size": False,  # 2.13 on
    # 2.15 on; before, a region budget must always cover the whole forward.
    "activation_memory_budget_require_full_coverage": True,
}


# The flags only the min-cut partitioner reads (its CSE, ban rules,
# capacities, memory budgets and knapsack solver: the engine's prepare/ CSE
# and decide/). torch's default_partition reads them only when it hands a
# graph with recompute tags to the min-cut.
_MIN_CUT_ONLY = frozenset({
    "cse", "recompute_views", "max_dist_from_bw", "ban_recompute_used_far_apart",
    "ban_recompute_long_fusible_chains", "ban_recompute_materialized_backward",
    "ban_recompute_not_in_allowlist", "ban_recompute_reductions", "aggressive_recomputation",
    "treat_parameters_as_free_to_save", "is_non_builtin_to_include", "activation_memory_budget",
    "activation_memory_budget_require_full_coverage", "activation_memory_budget_solver",
})


def options_from_torch(**overrides: Any) -> dict:
    """PartitionOptions as torch would run now, as a JSON-able dict: the
    release it reproduces (_release) and the running torch's configuration."""
    return _options_from_torch(True, overrides)


def _needs_min_cut_flags(joint_module: fx.GraphModule, partitioner: str) -> bool:
    """Whether a partition may read _MIN_CUT_ONLY: the min-cut's, or the
    default partitioner's on a graph with recompute tags (which it may hand
    to the min-cut). Any "recompute" entry counts, to stay on the safe side."""
    return partitioner != "default" or any("recompute" in n.meta for n in joint_module.graph.nodes)


def _options_from_torch(min_cut: bool, overrides: dict) -> dict:
    """options_from_torch; without `min_cut`, _MIN_CUT_ONLY left out (the
    engine's defaults stand in for flags nothing reads): on a graph of a
    few nodes the flag reads were the largest part of a drop-in default
    partition's fixed cost (bench/bench_small_dynamic.py)."""
    config = _internals.functorch_config()
    inductor_config = _internals.inductor_config()
    read = _internals.config_value  # getattr's answer at half the cost

    opts: dict[str, Any] = {"torch_release": _release.reproduced()}
    for name in _CONFIG_FIELDS:
        if not min_cut and name in _MIN_CUT_ONLY:
            continue
        opts[name] = (read(config, name, _FLAG_DEFAULTS[name]) if name in _FLAG_DEFAULTS
                      else read(config, name))
    for name in ("activation_memory_budget_solver", "activation_memory_budget_runtime_estimator"):
        if not min_cut and name in _MIN_CUT_ONLY:
            continue  # the estimator stays: the result's recompute_runtime reads it
        value = read(config, name)
        # A CustomKnapsackSolver / CustomRuntimeEstimator, or "profile" (which
        # times ops in Python): _custom.hooks runs it.
        opts[name] = value if isinstance(value, str) and value != "profile" else "custom"
    fallback_random = read(inductor_config, "fallback_random")
    # fx.Graph.eliminate_dead_code keeps random ops unless a tracing context
    # exists, in which case inductor's fallback_random decides.
    opts["dce_impure_random"] = bool(fallback_random) if _internals.tracing_context_active() else True
    opts["distributed_available"] = torch.distributed.is_available()
    opts["graphsafe_rng_functionalization"] = bool(read(config, "graphsafe_rng_functionalization")) and (
        not fallback_random
        or read(inductor_config, "test_configs").graphsafe_rng_func_ignores_fallback_random)
    # Activation offloading (torch's _activation_offloading package).
    opts["enable_activation_offloading"] = bool(read(config, "enable_activation_offloading"))
    for name in ("activation_offload_separate_stream", "activation_offload_sink_wait",
                 "activation_reload_prefetch"):
        opts[name] = bool(read(config, name))
    opts["activation_offload_cpu_gpu_bw"] = _internals.offload_cpu_gpu_bw()
    # supports_graphsafe_rng's device types (register_graphsafe_rng_device_type adds to them).
    opts["graphsafe_rng_device_types"] = _internals.graphsafe_rng_device_types()
    # Ranks agree through the rank group _partition passes along (_ranks).
    opts["sync_decision_cross_ranks"] = bool(read(config, "_sync_decision_cross_ranks"))
    # inductor's FP8 activation quantization pass, which torch's extraction runs.
    quantization = _quantization.options(
        read(inductor_config, "post_grad_fusion_options").get("activation_quantization_aten_pass"))
    opts["activation_quantization"] = quantization
    # remat's own setting (remat.torch.peak_memory_budget), not torch's config.
    opts["peak_memory_budget"] = get_peak_memory_budget()
    if opts["peak_memory_budget"]:
        # Only with a limit: without one the engine reads neither, and the
        # options stay what they were before the search existed.
        search = get_peak_search()
        opts["peak_search"] = search.search
        if search.nodes is not None:  # else the engine's, sized to the program
            opts["peak_search_nodes"] = search.nodes
        if search.seconds is not None:  # a safety net only when asked for
            opts["peak_search_seconds"] = search.seconds
    if get_backward_order() != "autograd":
        # Only when asked: torch's order needs no option.
        opts["backward_order"] = get_backward_order()
    memory_model = get_memory_model()
    if memory_model == "auto":
        memory_model = "inductor" if getattr(_for_inductor, "active", False) else "aten"
    if memory_model != "aten":
        # Only when not the default: aten's model needs no option.
        opts["memory_model"] = memory_model
        # inductor's reorder_for_peak_memory pass may run the kernels in
        # another order: the engine counts those orders too unless it is off.
        if memory_model == "inductor" and not _internals.config_value(
                _internals.inductor_config(), "reorder_for_peak_memory", True):
            opts["inductor_reorder"] = False
    opts.update(overrides)
    return opts


@dataclasses.dataclass
class Partition:
    forward: fx.GraphModule
    backward: fx.GraphModule
    result: dict  # the format-v1 partition result (saved values, decisions, timing)

    @property
    def peak_search(self) -> Optional[dict]:
        """How the plan under a peak-memory limit was found: the result's
        "peak_search" ({search, plans_built, cuts, solver_rounds,
        recompute_lower_bound (None if unknown), optimal, solver_nodes,
        stopped_by (None, "nodes" or "time"), seconds}); None
        when no limit was set."""
        return self.result.get("peak_search")


class _gc_paused:
    """Pauses the cyclic garbage collector, restoring its previous state.

    Export and import allocate hundreds of thousands of containers that stay
    alive until the call returns; on a large heap (the joint graph's fake
    tensors) each full collection they trigger re-walks everything, which
    costs more than the work itself. Reference counting still frees memory.
    (A class, not a generator context manager, like _step: it wraps every
    drop-in call.)
    """

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: Any) -> bool:
        if self.enabled:
            gc.enable()
        return False


def partition(joint_module: fx.GraphModule, *, num_fwd_outputs: int,
              static_lifetime_input_indices: Optional[list[int]] = None,
              partitioner: str = "min_cut", options: Optional[dict] = None) -> Partition:
    """Partitions an FX joint graph with remat; returns both modules and the report."""
    with _gc_paused():
        return _partition(joint_module, num_fwd_outputs, static_lifetime_input_indices,
                          partitioner, options)


class _step:
    """Turns any failure inside one step of the drop-in into a remat.RematError.

    remat's own errors (deliberate refusals, invalid graphs, no finite cut) and
    exceptions of the user's own solver or estimator (which torch raises too)
    pass unchanged; anything else (a TypeError in the exporter, an internal
    error) becomes a DropInError naming the step, with the original as its
    cause, so install()'s fallback can hand the graph to torch.

    A class rather than a generator context manager: every drop-in call
    enters four steps, and on a graph of a few nodes a generator's setup
    and teardown showed up (bench/bench_small_dynamic.py).
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, e: Optional[BaseException], tb: Any) -> bool:
        if not isinstance(e, Exception) or isinstance(e, remat.RematError) or \
                getattr(e, _custom.USER_CODE_MARK, False):
            return False  # no failure, a BaseException, or one that passes unchanged
        raise remat.DropInError(
            f"remat: the drop-in failed at step '{self.name}': {type(e).__name__}: {e}",
            step=self.name) from e


def _partition(joint_module: fx.GraphModule, num_fwd_outputs: int,
               static_lifetime_input_indices: Optional[list[int]],
               partitioner: str, options: Optional[dict]) -> Partition:
    with _step("options"):
        opts = _trace.request(
            _options_from_torch(_needs_min_cut_flags(joint_module, partitioner), {})
            if options is None else _with_release(options))
        hooks = _custom.hooks(joint_module, num_fwd_outputs, static_lifetime_input_indices, opts)
        hooks.update(_offload.hooks(joint_module, opts))
        quantization = opts.get("activation_quantization")
        if quantization is not None:
            # torch compares with its config's own value (an int stays an int).
            raw = _torch_quantization_config() if options is None else None
            threshold = (raw if isinstance(raw, dict) else quantization).get("size_in_mb", 100)
            hooks["size_check"] = _quantization.size_check(joint_module, threshold)
        group = (_ranks.rank_group(joint_module, opts) if opts.get("sync_decision_cross_ranks")
                 else None)
    # What the drop-in stamps on the graphs follows the same switches as the engine.
    with _release.following(opts):
        return _export_partition_import(joint_module, num_fwd_outputs,
                                        static_lifetime_input_indices, partitioner, opts, hooks,
                                        group)


def _export_partition_import(joint_module: fx.GraphModule, num_fwd_outputs: int,
                             static_lifetime_input_indices: Optional[list[int]],
                             partitioner: str, opts: dict, hooks: dict,
                             group: Optional[_ranks.TorchRankGroup]) -> Partition:
    CheckpointPolicy = _internals.CheckpointPolicy
    handles: list = []
    with _step("export"):
        doc = export_joint_graph(joint_module, num_fwd_outputs, static_lifetime_input_indices,
                                 as_json=True, handles=handles)
    with _no_fallback_once_synced(group):
        with _step("engine"):
            try:
                result = remat.partition(doc, opts, partitioner, as_json=False, rank_group=group,
                                         **hooks)
            except remat.NoFiniteCutError as e:
                # torch's min_cut_failed_* artifacts and files (and
                # REMAT_REPORT_DIR's diagnosis page), then the error.
                raise _trace.on_no_finite_cut(e, joint_module, doc) from e
        with _step("import"):
            # Mirror torch: the tag passes write MUST_SAVE into the joint graph
            # before extraction copies meta (torch's own run, should the fallback
            # take over, writes the same tags).
            forced = result.get("forced_must_save")
            if forced:
                by_name = {n.name: n for n in joint_module.graph.nodes}
                for name in forced:
                    by_name[name].meta["recompute"] = CheckpointPolicy.MUST_SAVE
            if partitioner == "min_cut" and opts.get("cse"):
                stamp_mutation_regions(joint_module)  # torch's CSE pass numbers them
            for hazard in result.get("hazards", ()):
                warnings.warn(_hazard_message(hazard), RematHazardWarning, stacklevel=3)
            # No file came between the export and this import: the document
            # checks, which guard a graph file, are left out (import_own_result).
            fw, bw = import_own_result(result, joint_module, handles)
            if _release.behaves("static_input_meta"):
                stamp_static_inputs(joint_module, static_lifetime_input_indices)
            # What torch's FP8 quantization pass does besides the graphs.
            _quantization.finish(result, joint_module, fw)
            # The logs and structured-trace artifacts torch emits for this graph,
            # the quantization pass's at extraction.
            _trace.after_partition(
                joint_module, doc, opts, result, fw, bw,
                extraction=lambda: _quantization.trace_artifacts(result, joint_module, handles))
    return Partition(fw, bw, result)


def _with_release(options: dict) -> dict:
    """Caller's options reproduce the running torch's release unless they
    name one (an UnsupportedError outside the supported range)."""
    if "torch_release" in options:
        return options
    return {**options, "torch_release": _release.reproduced()}


class RematHazardWarning(UserWarning):
    """A partition (torch's own, kept for parity) reads an input mutated before the backward."""


def _hazard_message(h: dict) -> str:
    when = (f"in place by '{h['mutated_by']}'" if h.get("mutated_by")
            else "after the forward returns (AOTAutograd's input mutation)")
    saved = (f"its input '{h['input']}'" if h["saved"] == h["input"]
             else f"'{h['saved']}', an alias of its input '{h['input']}',")
    readers = ", ".join(f"'{r}'" for r in h.get("readers", ()))
    return (f"remat: the plan saves {saved} for the backward, but '{h['input']}' is mutated {when} "
            f"before the backward reads it" + (f" in {readers}" if readers else "")
            + "; the backward may fail (\"modified by an inplace operation\") or read the new "
            "values. torch's partitioner makes the same plan; a remat peak memory budget "
            "(remat.torch.peak_memory_budget) never does.")


def _torch_quantization_config() -> Optional[dict]:
    return _internals.inductor_config().post_grad_fusion_options.get(
        "activation_quantization_aten_pass")


class _no_fallback_once_synced:
    """After ranks agreed, torch's partitioner must not run again on this rank
    alone (its sync would wait for ranks that moved on): failures say so.
    (A class, like _step: it wraps every drop-in call.)"""

    __slots__ = ("group",)

    def __init__(self, group: Optional[_ranks.TorchRankGroup]) -> None:
        self.group = group

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, e: Optional[BaseException], tb: Any) -> bool:
        if isinstance(e, remat.RematError) and self.group is not None and self.group.talked:
            setattr(e, NO_FALLBACK, True)
        return False


def min_cut_rematerialization_partition(
    joint_module: fx.GraphModule,
    _joint_inputs: Any,
    compiler: str = "inductor",
    *,
    num_fwd_outputs: int,
    static_lifetime_input_indices: Optional[list[int]] = None,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's min_cut_rematerialization_partition, computed by remat."""
    return _modules_only(joint_module, num_fwd_outputs, static_lifetime_input_indices, "min_cut")


def default_partition(
    joint_module: fx.GraphModule,
    _joint_inputs: Any,
    *,
    num_fwd_outputs: int,
    static_lifetime_input_indices: Optional[list[int]] = None,
    static_lifetime_input_nodes: Any = None,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's default_partition, computed by remat."""
    return _modules_only(joint_module, num_fwd_outputs, static_lifetime_input_indices, "default")


def _modules_only(joint_module: fx.GraphModule, num_fwd_outputs: int,
                  static_lifetime_input_indices: Optional[list[int]],
                  partitioner: str) -> tuple[fx.GraphModule, fx.GraphModule]:
    with _gc_paused():
        p = _partition(joint_module, num_fwd_outputs, static_lifetime_input_indices,
                       partitioner, None)
        fw, bw = p.forward, p.backward
        # Freed by reference counting before the collector resumes, so its
        # first young collection does not walk the whole result document.
        del p
    return fw, bw


# --- install / uninstall ------------------------------------------------------

# Set while the partitioner install() put in inductor's compile_fx runs: the
# graphs it returns are headed for inductor, whose generated code the
# "auto" memory model then follows (the compiler= argument cannot tell:
# torch's aot_eager backends leave it at its default, "inductor").
_for_inductor = threading.local()


def _headed_for_inductor(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def partition_fn(*args: Any, **kwargs: Any):
        outer = getattr(_for_inductor, "active", False)
        _for_inductor.active = True
        try:
            return fn(*args, **kwargs)
        finally:
            _for_inductor.active = outer

    return partition_fn  # functools.wraps kept __remat_installed__


# What undoes each patch install() made, in the order made.
_installed: list[Callable[[], None]] = []


def _with_fallback(ours: Callable, theirs: Callable) -> Callable:
    """Falls back to torch's function whenever remat fails, with a warning.

    Every failure inside the drop-in is a remat.RematError (see _step): a
    graph remat does not support yet (UnsupportedError), a failure of one of
    its steps (DropInError), or an error the engine found (where torch raises
    too, its own error then reaches the caller). Exceptions of the user's own
    solver or estimator are not remat's and pass unchanged.
    """

    @functools.wraps(ours)
    def partition_fn(*args: Any, **kwargs: Any):
        try:
            return ours(*args, **kwargs)
        except remat.RematError as e:
            if getattr(e, NO_FALLBACK, False):
                raise
            why = "not supported yet" if isinstance(e, remat.UnsupportedError) else type(e).__name__
            warnings.warn(f"remat: falling back to torch's partitioner ({why}): {e}", stacklevel=2)
            return theirs(*args, **kwargs)

    partition_fn.__remat_installed__ = True  # type: ignore[attr-defined]
    return partition_fn


def _targets() -> list[tuple[Any, str]]:
    out = []
    for module_name, attr in _internals.PARTITION_FN_HOLDERS:
        module = _internals.maybe_module(module_name)
        if module is not None:
            out.append((module, attr))
    return out


def install(*, fallback: bool = True) -> None:
    """Makes torch.compile and aot_autograd partition with remat.

    Patches the names torch's backends call (inductor's compile_fx, the
    aot_eager backends, aot_autograd's default) and the choke point every
    aot_autograd compilation goes through, so partition functions bound
    before install() (functools.partial of torch's, default arguments) are
    replaced too. With `fallback`, any graph remat fails on (one it does not
    support yet, such as a rewrite it does not reproduce, or a failure at any
    step of the drop-in) goes to torch's own partitioner with a warning;
    without it the remat.RematError is raised.

    Under a torch release remat does not reproduce (_release), install()
    changes nothing and warns once; install(fallback=False) raises
    UnsupportedError naming the supported range. set_torch_release("nearest")
    before it opts in to the nearest supported release's behavior.
    """
    if _installed:
        return
    try:
        _release.reproduced()
    except remat.UnsupportedError as e:
        if not fallback:
            raise
        _warn_unsupported_once(str(e))
        return
    partitioners = _internals.partitioners()
    torch_fns = {
        "min_cut_rematerialization_partition": partitioners.min_cut_rematerialization_partition,
        "default_partition": partitioners.default_partition,
    }
    ours = {
        "min_cut_rematerialization_partition": min_cut_rematerialization_partition,
        "default_partition": default_partition,
    }
    if fallback:
        ours = {k: _with_fallback(v, torch_fns[k]) for k, v in ours.items()}

    for module, attr in _targets():
        if getattr(module, attr, None) is torch_fns[attr]:
            _installed.append(functools.partial(setattr, module, attr, getattr(module, attr)))
            fn = ours[attr]
            if module.__name__ == _internals.INDUCTOR_PARTITION_HOLDER:
                fn = _headed_for_inductor(fn)
            setattr(module, attr, fn)

    def replace(fn: Callable) -> Callable:
        base = fn.func if isinstance(fn, functools.partial) else fn
        for name, theirs in torch_fns.items():
            if base is theirs:
                if isinstance(fn, functools.partial):
                    return functools.partial(ours[name], *fn.args, **fn.keywords)
                return ours[name]
        return fn

    _installed.append(_internals.patch_partition_call(replace))


_warned_unsupported = False


def _warn_unsupported_once(message: str) -> None:
    global _warned_unsupported
    if not _warned_unsupported:
        _warned_unsupported = True
        warnings.warn(message, stacklevel=3)


def uninstall() -> None:
    """Restores torch's own partitioners."""
    while _installed:
        _installed.pop()()


def installed() -> bool:
    return bool(_installed)
