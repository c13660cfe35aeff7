"""The node runtimes torch's activation-offloading prefetch reads, for remat.

Contract: `hooks(joint_module, opts)` returns the keyword argument of
`remat.partition` (`offload_node_runtime`) when the options ask for a
prefetching offload (enable_activation_offloading, separate stream and
activation_reload_prefetch), else {}. The hook takes a joint node id (its
position in `joint_module.graph` as exported) and answers what torch 2.13's
`reorder_for_prefetch` credits that node with: `benchmark_node(node)` when
`is_compute_node(node)`, else 0. Both are looked up on torch's
`_activation_offloading.activation_offloading` module at call time, so the
functions torch's own pass would call (or a patch of them) are the ones
called. torch asks on its backward graph's copy of the node; remat asks on
the joint node, whose target and argument values (hence benchmark key) are
the same.
"""

from __future__ import annotations

from typing import Any, Callable

import torch.fx as fx

from . import _internals


def _prefetch_runs(opts: dict) -> bool:
    return bool(opts.get("enable_activation_offloading") and opts.get("activation_offload_separate_stream")
                and opts.get("activation_reload_prefetch"))


def hooks(joint_module: fx.GraphModule, opts: dict) -> dict[str, Callable[[int], float]]:
    if not _prefetch_runs(opts):
        return {}
    nodes: list[Any] = list(joint_module.graph.nodes)

    def offload_node_runtime(joint_id: int) -> float:
        ao = _internals.activation_offloading()
        node = nodes[joint_id]
        return float(ao.benchmark_node(node)) if ao.is_compute_node(node) else 0.0

    return {"offload_node_runtime": offload_node_runtime}
