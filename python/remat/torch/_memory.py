"""Peak memory of a forward/backward module pair, and remat's peak-memory setting.

Contract:
  simulate_memory(forward, backward, num_fwd_outputs=None, *, mutated_inputs=())
      -> dict: the engine's liveness simulation (remat/memory.h, docs/format.md
      "memory") of one training step of any partition, torch's own included,
      plus "hazards" (saved values aliasing an input mutated before the
      backward reads it). Both graphs are exported in one pass so their
      storage identities agree. `num_fwd_outputs` defaults to the forward's
      outputs minus the backward's saved-value placeholders.
  peak_memory_budget(nbytes) / set_peak_memory_budget(nbytes) /
  get_peak_memory_budget(): remat's own setting, read by the drop-in
      partitioners (options_from_torch) and never written into
      torch._functorch.config. 0 or None: no limit.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator, Optional, Sequence

import orjson
import torch.fx as fx

import remat
from ._fx_to_json import FORMAT_JOINT, FORMAT_VERSION, _Exporter


def _graph_doc(nodes: list, ops: list) -> bytes:
    return orjson.dumps({
        "format": FORMAT_JOINT,
        "version": FORMAT_VERSION,
        "num_fwd_outputs": 0,
        "static_lifetime_input_indices": [],
        "ops": ops,
        "nodes": nodes,
    })


def _is_saved_placeholder(node: fx.Node) -> bool:
    """A backward placeholder that receives a saved value (not a tangent or seed)."""
    from ._internals import BackwardState

    name = str(node.target)
    if "tangents" in name or "bwd_seed" in name or "bwd_base_offset" in name:
        return False
    return not isinstance(node.meta.get("val"), BackwardState)


def _count_outputs(gm: fx.GraphModule) -> int:
    from torch.utils import _pytree as pytree

    (out,) = gm.graph.find_nodes(op="output")
    return len(pytree.arg_tree_leaves(*out.args))


def simulate_memory(forward: fx.GraphModule, backward: fx.GraphModule,
                    num_fwd_outputs: Optional[int] = None, *,
                    mutated_inputs: Sequence[str] = ()) -> dict:
    """The simulated memory of one training step of a (forward, backward) pair.

    Returns {"memory": {"peak_bytes": ..., "peak_at": ..., "timeline": ...},
    "hazards": [...]}, as the "memory" and "hazards" members of a partition
    result. `mutated_inputs` names forward placeholders the caller mutates
    after the forward returns (AOTAutograd's out-of-graph input mutations).
    """
    if num_fwd_outputs is None:
        saved = sum(1 for n in backward.graph.find_nodes(op="placeholder") if _is_saved_placeholder(n))
        num_fwd_outputs = _count_outputs(forward) - saved
    ex = _Exporter(None)
    fw_nodes = [ex.node(n) for n in forward.graph.nodes]
    bw_nodes = [ex.node(n) for n in backward.graph.nodes]
    ops = list(ex.ops.values())
    out = remat._ext().simulate_memory(_graph_doc(fw_nodes, ops), _graph_doc(bw_nodes, ops),
                                       int(num_fwd_outputs), [str(m) for m in mutated_inputs])
    return orjson.loads(out)


# --- the peak-memory setting ------------------------------------------------

_setting = threading.local()
_global_budget: list[int] = [0]


def _check(nbytes: Optional[int]) -> int:
    if nbytes is None:
        return 0
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise remat.InvalidOptionError(
            f"peak_memory_budget: expected a number of bytes >= 0 (0 or None: no limit), got {nbytes!r}")
    return nbytes


def set_peak_memory_budget(nbytes: Optional[int]) -> None:
    """Sets the peak-memory limit (bytes) remat's partitioners plan against; 0/None clears it."""
    _global_budget[0] = _check(nbytes)


def get_peak_memory_budget() -> int:
    """The limit in force: the innermost peak_memory_budget() block, else the global setting."""
    stack = getattr(_setting, "stack", None)
    return stack[-1] if stack else _global_budget[0]


@contextlib.contextmanager
def peak_memory_budget(nbytes: Optional[int]) -> Iterator[None]:
    """Within the block (this thread), remat's partitioners plan against `nbytes` of peak memory."""
    value = _check(nbytes)
    stack = getattr(_setting, "stack", None)
    if stack is None:
        stack = _setting.stack = []
    stack.append(value)
    try:
        yield
    finally:
        stack.pop()


__all__ = ["simulate_memory", "peak_memory_budget", "set_peak_memory_budget", "get_peak_memory_budget"]
