"""Peak memory of a forward/backward module pair, and remat's peak-memory setting.

Contract:
  simulate_memory(forward, backward, num_fwd_outputs=None, *, mutated_inputs=())
      -> dict: the engine's liveness simulation (remat/memory.h, docs/format.md
      "memory") of one training step of any partition, torch's own included,
      plus "hazards" (saved values aliasing an input mutated before the
      backward reads it). Both graphs are exported in one pass so their
      storage identities agree. `num_fwd_outputs` defaults to the forward's
      outputs minus the backward's saved-value placeholders.
  peak_memory_budget(nbytes, search="fast", seconds=None, backward_order="autograd",
                     memory_model="auto", nodes=None) /
  set_peak_memory_budget(nbytes, search=..., seconds=..., backward_order=..., memory_model=...,
                         nodes=...) /
  get_peak_memory_budget() -> int / get_peak_search() -> PeakSearchSetting /
  get_backward_order() -> str / get_memory_model() -> str:
      remat's own setting, read by the drop-in partitioners
      (options_from_torch: "peak_memory_budget", and "peak_search" /
      "peak_search_nodes" / "peak_search_seconds" when a limit is set) and
      never written into torch._functorch.config. 0 or None: no limit.
      `search` is how the plan is found (PartitionOptions::PeakSearch,
      docs/memory.md): "fast" (the default) or "exact" (remat's optimizer
      over every valid plan; fast is never worse than torch's plans), or
      "torch_plans" (torch's budget plans, then repairs); `nodes` bounds
      "exact"'s search in solver nodes (counted work: the same plan on every
      machine and rank; None: sized to the program, the engine's default); `seconds`, None by default, is a wall-time safety
      net over the search (a search it cuts short says so in the result's
      peak_search "stopped_by", and may then differ between machines). `backward_order`
      "memory" lets the engine reorder the backward where that lowers the
      simulated peak (PartitionOptions::BackwardOrder; the "backward_order"
      option, with or without a limit). `memory_model` is how the peak is
      counted (the "memory_model" option, remat/memory.h MemoryModel):
      "aten" (op by op, as eager FX code and aot_eager run the graphs),
      "inductor" (intermediates inductor fuses get no buffer), or "auto"
      (default): inductor's for the graphs inductor's compile_fx partitions
      through install(), aten's for every other caller. Without a limit it
      changes no saved set, only the reported memory (and, under
      backward_order "memory", which order counts as lower). Each call sets all five: a
      bare `nbytes` means fast in autograd's order under "auto". Bad arguments raise
      remat.InvalidOptionError naming the argument.
"""

from __future__ import annotations

import contextlib
import threading
import math
from typing import Iterator, NamedTuple, Optional, Sequence

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
                    mutated_inputs: Sequence[str] = (), memory_model: str = "aten",
                    inductor_reorder: bool = True) -> dict:
    """The simulated memory of one training step of a (forward, backward) pair.

    Returns {"memory": {"peak_bytes": ..., "peak_at": ..., "timeline": ...},
    "hazards": [...]}, as the "memory" and "hazards" members of a partition
    result. `mutated_inputs` names forward placeholders the caller mutates
    after the forward returns (AOTAutograd's out-of-graph input mutations).
    `memory_model` is how the pair runs: "aten" (op by op, as FX code and
    aot_eager run it) or "inductor" (as inductor's generated code: fused
    intermediates get no buffer; docs/memory.md "Under inductor").
    `inductor_reorder` (under "inductor"): whether inductor's
    reorder_for_peak_memory pass runs (its default); each graph is then
    also counted in the kernel orders that pass may keep, the highest peak
    kept (the result's "kernel_orders" says which).
    """
    if num_fwd_outputs is None:
        saved = sum(1 for n in backward.graph.find_nodes(op="placeholder") if _is_saved_placeholder(n))
        num_fwd_outputs = _count_outputs(forward) - saved
    ex = _Exporter(None)
    fw_nodes = [ex.node(n) for n in forward.graph.nodes]
    bw_nodes = [ex.node(n) for n in backward.graph.nodes]
    ops = list(ex.ops.values())
    out = remat._ext().simulate_memory(_graph_doc(fw_nodes, ops), _graph_doc(bw_nodes, ops),
                                       int(num_fwd_outputs), [str(m) for m in mutated_inputs],
                                       memory_model, bool(inductor_reorder))
    return orjson.loads(out)


# --- the peak-memory setting ------------------------------------------------

# The engine's names (remat::peak_search_name); checked here too so the error
# names the Python argument and comes at the call, not at the next compile.
PEAK_SEARCHES = ("torch_plans", "fast", "exact")
BACKWARD_ORDERS = ("autograd", "memory")  # remat::backward_order_name
# remat::memory_model_name, and "auto": inductor's model for the graphs
# inductor's compile_fx partitions (install() marks those calls), aten's
# for every other caller.
MEMORY_MODELS = ("auto", "aten", "inductor")


class PeakSearchSetting(NamedTuple):
    """How a peak_memory_budget plan is searched: the engine's "peak_search"
    and "peak_search_seconds" options, and "peak_search_nodes"."""

    search: str = "fast"
    seconds: Optional[float] = None  # None: no time limit
    nodes: Optional[int] = None  # None: the engine's, sized to the program


class _Setting(NamedTuple):
    nbytes: int
    search: PeakSearchSetting
    backward_order: str = "autograd"
    memory_model: str = "auto"


_setting = threading.local()
_global_setting: list[_Setting] = [_Setting(0, PeakSearchSetting())]


def _check(nbytes: Optional[int], search: str = "fast", seconds: Optional[float] = None,
           backward_order: str = "autograd", memory_model: str = "auto", nodes: Optional[int] = None) -> _Setting:
    if nbytes is None:
        nbytes = 0
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise remat.InvalidOptionError(
            f"peak_memory_budget: nbytes: expected a number of bytes >= 0 (0 or None: no limit), "
            f"got {nbytes!r}")
    if not isinstance(search, str) or search not in PEAK_SEARCHES:
        raise remat.InvalidOptionError(
            f"peak_memory_budget: search: expected one of {', '.join(map(repr, PEAK_SEARCHES))}, "
            f"got {search!r}")
    # bool is an int to Python but never a duration; inf and nan cannot go
    # through the options JSON.
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not math.isfinite(seconds) or seconds <= 0):
        raise remat.InvalidOptionError(
            f"peak_memory_budget: seconds: expected a finite number of seconds > 0, or None (no time "
            f"limit), got {seconds!r}")
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes <= 0):
        raise remat.InvalidOptionError(
            f"peak_memory_budget: nodes: expected a number of solver nodes > 0, or None (sized to the "
            f"program), got {nodes!r}")
    if not isinstance(backward_order, str) or backward_order not in BACKWARD_ORDERS:
        raise remat.InvalidOptionError(
            f"peak_memory_budget: backward_order: expected one of {', '.join(map(repr, BACKWARD_ORDERS))}, "
            f"got {backward_order!r}")
    if not isinstance(memory_model, str) or memory_model not in MEMORY_MODELS:
        raise remat.InvalidOptionError(
            f"peak_memory_budget: memory_model: expected one of {', '.join(map(repr, MEMORY_MODELS))}, "
            f"got {memory_model!r}")
    search_setting = PeakSearchSetting(search, None if seconds is None else float(seconds), nodes)
    return _Setting(nbytes, search_setting, backward_order, memory_model)


def set_peak_memory_budget(nbytes: Optional[int], search: str = "fast",
                           seconds: Optional[float] = None, backward_order: str = "autograd",
                           memory_model: str = "auto", nodes: Optional[int] = None) -> None:
    """Sets the peak-memory limit (bytes) remat's partitioners plan against,
    how they search for the plan, the backward's order and the memory model;
    0/None clears the limit."""
    _global_setting[0] = _check(nbytes, search, seconds, backward_order, memory_model, nodes)


def _current() -> _Setting:
    stack = getattr(_setting, "stack", None)
    return stack[-1] if stack else _global_setting[0]


def get_peak_memory_budget() -> int:
    """The limit in force: the innermost peak_memory_budget() block, else the global setting."""
    return _current().nbytes


def get_peak_search() -> PeakSearchSetting:
    """The search in force with that limit: (search, seconds, nodes), from the same
    place as get_peak_memory_budget()."""
    return _current().search


def get_backward_order() -> str:
    """The backward order in force ("autograd" or "memory"), from the same
    place as get_peak_memory_budget()."""
    return _current().backward_order


def get_memory_model() -> str:
    """The memory model setting in force ("auto", "aten" or "inductor"),
    from the same place as get_peak_memory_budget()."""
    return _current().memory_model


@contextlib.contextmanager
def peak_memory_budget(nbytes: Optional[int], search: str = "fast",
                       seconds: Optional[float] = None, backward_order: str = "autograd",
                       memory_model: str = "auto", nodes: Optional[int] = None) -> Iterator[None]:
    """Within the block (this thread), remat's partitioners plan against `nbytes`
    of peak memory, the plan found by `search` ("exact": within `nodes`
    solver nodes; `seconds`, when given, a wall-time safety net),
    the backward in `backward_order` ("memory": reordered where that lowers
    the simulated peak), the peak counted under `memory_model` ("auto":
    inductor's for graphs inductor compiles, aten's otherwise)."""
    value = _check(nbytes, search, seconds, backward_order, memory_model, nodes)
    stack = getattr(_setting, "stack", None)
    if stack is None:
        stack = _setting.stack = []
    stack.append(value)
    try:
        yield
    finally:
        stack.pop()


__all__ = ["simulate_memory", "peak_memory_budget", "set_peak_memory_budget", "get_peak_memory_budget",
           "get_peak_search", "get_backward_order", "get_memory_model", "PeakSearchSetting",
           "PEAK_SEARCHES", "BACKWARD_ORDERS", "MEMORY_MODELS"]
