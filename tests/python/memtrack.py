"""Measured peak memory of a partitioned training step, on CPU.

:func:`measure_step` runs a forward/backward GraphModule pair the way
AOTAutograd runs compiled graphs (the boxed calling convention of
``torch.fx.graph._BoxedCodeGen``: each graph takes one argument list, clears
it, and FX's generated code drops every value after its last use), and a
:class:`LiveStorageTracker` counts the bytes of live tensor storages after
every op:

* the forward's inputs are real tensors built from its placeholders' fake
  values (random floats, zero integers: indices stay in range), held by the
  caller for the whole step, like a model's parameters and inputs;
* the forward's first ``num_fwd_outputs`` outputs are held until the end;
  the saved values are handed to the backward by name (RNG states by
  position) and dropped by the caller before it runs;
* tangents are allocated when the backward starts; gradients are kept.

The tracker sees storages through weak references (``StorageWeakRef``): it
keeps nothing alive, and an expired reference is a freed storage. It samples
after each op that the dispatcher runs (the only moments memory grows), so
its maximum is the peak. That is what ``remat.torch.simulate_memory`` and the
engine's ``memory`` section predict, byte for byte.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx as fx
# The size hint as the running release's partitioner reads it (remat's one
# shim over optimization_hint / size_hint).
from remat.torch._internals import optimization_hint
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class LiveStorageTracker(TorchDispatchMode):
    """Counts live tensor-storage bytes after every dispatched op."""

    supports_higher_order_operators = True

    def __init__(self, device: str = "cpu") -> None:
        super().__init__()
        self.device = device
        self.entries: dict[int, tuple[StorageWeakRef, int]] = {}
        self.peak = 0
        self.peak_at = ""
        self.samples: list[tuple[str, int]] = []

    def track(self, value: Any) -> None:
        for t in pytree.tree_leaves(value):
            if not isinstance(t, torch.Tensor) or t.device.type != self.device:
                continue
            storage = t.untyped_storage()
            key = storage._cdata
            old = self.entries.get(key)
            if old is None or old[0].expired():
                self.entries[key] = (StorageWeakRef(storage), storage.nbytes())

    def live_bytes(self) -> int:
        live, dead = 0, []
        for key, (ref, nbytes) in self.entries.items():
            if ref.expired():
                dead.append(key)
            else:
                live += nbytes
        for key in dead:
            del self.entries[key]
        return live

    def sample(self, label: str) -> int:
        live = self.live_bytes()
        self.samples.append((label, live))
        if live > self.peak:
            self.peak, self.peak_at = live, label
        return live

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.track((args, kwargs, out))
        self.sample(str(func))
        return out


# --------------------------------------------------------------------------- inputs


def _hint(x: Any) -> int:
    return x if isinstance(x, int) else optimization_hint(x, fallback=4096)


def _real_value(val: Any, device: str = "cpu") -> Any:
    """A real value shaped like a placeholder's fake value, on `device`."""
    if isinstance(val, torch.Tensor):
        shape = [_hint(s) for s in val.shape]
        stride = [_hint(s) for s in val.stride()]
        t = torch.empty_strided(shape, stride, dtype=val.dtype, device=device)
        if t.is_floating_point() or t.is_complex():
            t.normal_()
        else:
            t.zero_()
        return t
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return type(val.node.hint)(val.node.hint) if val.node.hint is not None else 1
    return val


def placeholder_values(gm: fx.GraphModule, device: str = "cpu") -> list[Any]:
    return [_real_value(n.meta.get("val"), device) for n in gm.graph.find_nodes(op="placeholder")]


def boxed(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of `gm` whose code takes one argument list and clears it."""
    from torch.fx.graph import _BoxedCodeGen

    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    graph.set_codegen(_BoxedCodeGen())
    copy = fx.GraphModule(gm, graph)
    copy.recompile()
    return copy


def _constants(gm: fx.GraphModule) -> list[torch.Tensor]:
    out = []
    for n in gm.graph.find_nodes(op="get_attr"):
        obj: Any = gm
        for part in str(n.target).split("."):
            obj = getattr(obj, part)
        if isinstance(obj, torch.Tensor):
            out.append(obj)
    return out


def _is_saved_placeholder(node: fx.Node) -> bool:
    from remat.torch._memory import _is_saved_placeholder as saved

    return saved(node)


# --------------------------------------------------------------------------- the step


def measure_step(forward: fx.GraphModule, backward: fx.GraphModule, num_fwd_outputs: int,
                 inputs: Optional[list[Any]] = None, device: str = "cpu") -> LiveStorageTracker:
    """Runs one training step of the pair under a tracker; returns the tracker (``.peak``)."""
    fw, bw = boxed(forward), boxed(backward)
    primals = placeholder_values(forward, device) if inputs is None else list(inputs)
    bw_placeholders = list(bw.graph.find_nodes(op="placeholder"))
    tracker = LiveStorageTracker(device)
    with torch.no_grad():
        tracker.track(primals)
        tracker.track(_constants(fw))
        tracker.track(_constants(bw))
        tracker.sample("inputs")
        with tracker:
            outs = fw(list(primals))
        outs = list(outs)
        outputs, saved = outs[:num_fwd_outputs], outs[num_fwd_outputs:]
        del outs
        (fw_out,) = forward.graph.find_nodes(op="output")
        saved_nodes = pytree.arg_tree_leaves(*fw_out.args)[num_fwd_outputs:]
        by_name = {n.name: i for i, n in enumerate(saved_nodes) if isinstance(n, fx.Node)}
        taken = [False] * len(saved)
        args: list[Any] = [None] * len(bw_placeholders)
        tangent_slots, positional = [], []
        for k, ph in enumerate(bw_placeholders):
            if not _is_saved_placeholder(ph):
                tangent_slots.append(k)
                continue
            i = by_name.get(ph.name)
            if i is not None and not taken[i]:
                taken[i] = True
                args[k] = saved[i]
            else:
                positional.append(k)
        rest = (i for i in range(len(saved)) if not taken[i])
        for k in positional:
            i = next(rest, None)
            if i is not None:
                args[k] = saved[i]
        del saved  # the runtime's references go; the backward's own remain
        with tracker:
            for k in tangent_slots:
                args[k] = _real_value(bw_placeholders[k].meta.get("val"), device)
            grads = bw(args)
        tracker.track(grads)
        tracker.sample("end")
        del grads, outputs
    return tracker
