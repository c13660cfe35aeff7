"""torch's custom memory-budget solver and runtime estimator, run for remat.

Contract: `hooks(joint_module, num_fwd_outputs, static_lifetime_input_indices,
opts)` returns the keyword arguments for `remat.partition` (`knapsack_solver`,
`runtime_estimator`) that call `torch._functorch.config`'s
`activation_memory_budget_solver` / `activation_memory_budget_runtime_estimator`
objects exactly as the running torch's partitioner does, or {} when neither option is
"custom" in `opts` (`options_from_torch` writes "custom" for a non-string value).

  * The solver is called as ``SOLVER(memory, joint_graph, max_memory,
    node_info, all_recomputable_banned_nodes)`` under ``no_dispatch()``; its
    ``(saved, recomputed)`` result is unpacked as torch unpacks it, and each
    recomputed index is looked up the way torch's loop does (Python indexing:
    negative indices count from the end, failing lookups are skipped).
  * The estimator is called as ``RUNTIME_MODE(node)``, once per knapsack item.
  * `joint_graph`, `node_info` and the nodes are torch's own view: on the
    first call, a copy of the joint graph goes through the steps torch's
    min_cut_rematerialization_partition takes before choosing saved values
    (DCE, CSE when enabled, recompute-tag cleanup, forced saves,
    classify_nodes, ``dist_from_bw``), so they are nodes of a graph like the
    one torch would pass (same names, args, users, meta), not the caller's
    joint module, which remat leaves as it is. Node objects differ in identity
    from torch's (it is a copy), and that copy's meta dicts are shallow copies.
  * An exception the solver or estimator raises (unpacking its result
    included) is marked with `USER_CODE_MARK`, so the drop-in lets it reach
    the caller unchanged, as torch does.
  * Like the drop-in's other options, any callable is accepted; torch accepts
    only CustomKnapsackSolver / CustomRuntimeEstimator instances and raises
    RuntimeError for other callables.
"""

from __future__ import annotations

import copy
import operator
from typing import Any, Callable, Optional

import torch.fx as fx

from . import _internals


class _TorchView:
    """The partitioner's state at choose_saved_values_set, built on first use."""

    def __init__(self, joint_module: fx.GraphModule, num_fwd_outputs: int,
                 static_lifetime_input_indices: Optional[list[int]]) -> None:
        self._joint = joint_module
        self._num_fwd_outputs = num_fwd_outputs
        self._static = list(static_lifetime_input_indices or [])
        # Joint ids are positions in the graph as exported, before remat runs.
        self._names = [n.name for n in joint_module.graph.nodes]
        self._built = False

    def _build(self) -> None:
        config = _internals.functorch_config()
        tp = _internals.partitioners()

        # torch's prefix of min_cut_rematerialization_partition, on a copy.
        gm = fx.GraphModule(self._joint, copy.deepcopy(self._joint.graph))
        gm.graph.eliminate_dead_code()
        if config.cse:
            gm.graph = _internals.cse_as_partitioner(gm, self._num_fwd_outputs)
        if tp.has_recomputable_ops(gm):
            gm = tp.cleanup_recompute_tags(gm, is_default_partition=False)
        if not config.unsafe_allow_optimization_of_collectives:
            tp.force_save_collectives(gm)
        tp.force_save_effectful_ops(gm)
        tp.force_save_bw_mutation_src(gm)
        node_info = tp.classify_nodes(gm, self._static, self._num_fwd_outputs)
        for node in reversed(gm.graph.nodes):
            if node.op == "output":
                node.dist_from_bw = int(1e9)
            elif not node_info.is_required_fw(node):
                node.dist_from_bw = 0
            else:
                node.dist_from_bw = int(1e9)
                for user in node.users:
                    node.dist_from_bw = min(node.dist_from_bw, user.dist_from_bw + 1)
        self.graph = gm.graph
        self.node_info = node_info
        self._by_name = {n.name: n for n in gm.graph.nodes}
        self._built = True

    def node(self, joint_id: int) -> fx.Node:
        if not self._built:
            self._build()
        return self._by_name[self._names[joint_id]]


# The attribute marking an exception raised by the user's own solver or
# estimator: torch would raise it too, so the drop-in passes it on unchanged
# instead of reporting a remat failure (see _dropin).
USER_CODE_MARK = "_remat_raised_by_user_code"


def _user_call(fn: Callable, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as e:
        setattr(e, USER_CODE_MARK, True)
        raise


def _knapsack_hook(solver: Callable, view: _TorchView) -> Callable:
    def knapsack_solver(memory: list, max_memory: float, banned_ids: list) -> tuple:
        banned = [view.node(i) for i in banned_ids]
        with _internals.no_dispatch():
            def solve() -> Any:
                _saved, recomputed = solver(memory, view.graph, max_memory, view.node_info, banned)
                return recomputed

            recomputed = _user_call(solve)
        # torch: `try: dont_ban.add(all_recomputable_banned_nodes[idx])` and
        # skip what fails; the engine takes plain in-range positions.
        positions = []
        for idx in recomputed:
            try:
                banned[idx]
                positions.append(operator.index(idx) % len(banned))
            except Exception:
                continue
        return [], positions

    return knapsack_solver


def _estimator_hook(estimator: Callable, view: _TorchView) -> Callable:
    def runtime_estimator(joint_id: int) -> float:
        return _user_call(estimator, view.node(joint_id))

    return runtime_estimator


def _profile_estimator(node: fx.Node) -> float:
    """The "profile" runtime estimator: time the node's op on real tensors.

    As torch: symbolic sizes and strides take their hints (4096 without one),
    SymInts their hint, SymFloats 1.0, SymBools True; CUDA values are timed
    with inductor's GPU benchmarker, like torch. torch cannot profile CPU
    values at all; remat times them with the CPU benchmarker instead.
    """
    import torch

    benchmarker = _internals.benchmarking().benchmarker

    def hint(d: Any) -> int:
        return _internals.optimization_hint(d, fallback=4096)

    on_cuda = False

    def materialize(x: Any) -> Any:
        nonlocal on_cuda
        if not isinstance(x, fx.Node):
            return x
        val = x.meta["val"]
        if isinstance(val, torch.Tensor):
            on_cuda = on_cuda or val.device.type == "cuda"
            return val.new_empty_strided([hint(d) for d in val.shape],
                                         [hint(d) for d in val.stride()])
        if isinstance(val, torch.SymInt):
            return hint(val)
        if isinstance(val, torch.SymFloat):
            return 1.0
        if isinstance(val, torch.SymBool):
            return True
        return x

    with _internals.no_dispatch():
        args, kwargs = _internals.pytree.tree_map(materialize, (node.args, node.kwargs))
        run = lambda: node.target(*args, **kwargs)  # noqa: E731
        return benchmarker.benchmark_gpu(run) if on_cuda else benchmarker.benchmark_cpu(run)


def hooks(joint_module: fx.GraphModule, num_fwd_outputs: int,
          static_lifetime_input_indices: Optional[list[int]], opts: dict) -> dict[str, Any]:
    """remat.partition keyword arguments running torch's custom solver/estimator."""
    config = _internals.functorch_config()

    out: dict[str, Any] = {}
    view = None
    for option, kwarg, make in (
            ("activation_memory_budget_solver", "knapsack_solver", _knapsack_hook),
            ("activation_memory_budget_runtime_estimator", "runtime_estimator", _estimator_hook)):
        # options_from_torch wrote "custom" for anything but a named one
        # (a callable, or the "profile" estimator): only then is the flag
        # read again, here.
        if opts.get(option) != "custom":
            continue
        value = getattr(config, option)
        if value == "profile" and kwarg == "runtime_estimator":
            value = _profile_estimator  # timed here, then handed to the engine
        elif isinstance(value, str):
            continue
        if not callable(value):
            import remat

            raise remat.InvalidOptionError(
                f"torch._functorch.config.{option}: expected a string or a callable, "
                f"got {type(value).__name__}")
        if view is None:
            view = _TorchView(joint_module, num_fwd_outputs, static_lifetime_input_indices)
        out[kwarg] = make(value, view)
    return out


__all__ = ["hooks"]
