"""Joint graphs with functional collectives, for the cross-rank sync tests.

torch's `_sync_decision_cross_ranks` only acts on graphs that call
_c10d_functional ops, so the corpus (single-device models) never reaches it.
These models are traced by aot_function in a process whose default process
group is initialized (gloo in tests/python/sync_worker.py, the fake backend in
test_sync_decision.py); the forward runs once, on that group.

`partition_both` runs torch's partitioner and remat's on fresh copies of the
same joint graph under the same config patch, recording what each sent
through torch.distributed and each structured-trace artifact it logged, so a
test can compare graphs, collectives and artifacts.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.fx as fx

ARTIFACT = "aot_joint_graph_sync_decision_cross_ranks"


@dataclasses.dataclass
class Joint:
    name: str
    module: fx.GraphModule
    kwargs: dict  # num_fwd_outputs, static_lifetime_input_indices
    fake_mode: Any  # the FakeTensorMode of its meta values: partitioners run inside it

    def fresh(self) -> fx.GraphModule:
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        with unset_fake_temporarily():
            return copy.deepcopy(self.module)


def capture(name: str, fn: Callable, inputs: tuple) -> Joint:
    from functorch.compile import aot_function, make_boxed_func
    from torch._functorch.partitioners import default_partition

    seen: list[Joint] = []

    def recorder(joint, joint_inputs, **kwargs):
        from torch._guards import detect_fake_mode
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        vals = [n.meta.get("val") for n in joint.graph.nodes if n.op == "placeholder"]
        with unset_fake_temporarily():
            copied = copy.deepcopy(joint)
        seen.append(Joint(name, copied, dict(kwargs), detect_fake_mode(vals)))
        return default_partition(joint, joint_inputs, **kwargs)

    def nop(gm, _example_inputs):
        return make_boxed_func(gm)

    aot_function(fn, fw_compiler=nop, bw_compiler=nop, partition_fn=recorder)(*inputs)
    assert len(seen) == 1, name
    return seen[0]


# --- models --------------------------------------------------------------------------


def mlp_allreduce(width: int = 16, depth: int = 4):
    """An MLP scaled by an all-reduced statistic: collectives in the forward."""

    def fn(x, buf, *ws):
        s = funcol.all_reduce(buf, "sum", dist.group.WORLD)
        h = x
        for i, w in enumerate(ws):
            h = h @ w
            h = torch.relu(h) * s if i % 2 == 0 else torch.sigmoid(h).sin() + s
        return h.sum()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, width, generator=g, requires_grad=True)
    ws = [torch.randn(width, width, generator=g, requires_grad=True) for _ in range(depth)]
    buf = torch.randn(width, generator=g)
    return fn, (x, buf, *ws)


def fsdp_like(width: int = 16, shard_rows: int = 8, batch: int = 4):
    """Weights all-gathered in the forward and gradients reduce-scattered in the
    backward (the autograd-aware functional collectives): collectives on both
    sides, as FSDP's. `batch` may differ per rank: it changes the sizes of the
    activations, not the graph's structure (shards must match across ranks)."""

    def fn(x, w1_shard, w2_shard):
        w1 = funcol.all_gather_single_autograd(w1_shard, 0, dist.group.WORLD)
        h = torch.tanh(x @ w1.t())
        w2 = funcol.all_gather_single_autograd(w2_shard, 0, dist.group.WORLD)
        h = torch.relu(h @ w2[:, : h.shape[1]].t()).cos()
        return (h * h).sum()

    g = torch.Generator().manual_seed(1)
    world = dist.get_world_size()
    x = torch.randn(batch, width, generator=g, requires_grad=True)
    w1 = torch.randn(shard_rows, width, generator=g, requires_grad=True)
    w2 = torch.randn(shard_rows, shard_rows * world, generator=g, requires_grad=True)
    return fn, (x, w1, w2)


def no_collectives(width: int = 16):
    def fn(x, w):
        return torch.relu(x @ w).sin().sum()

    g = torch.Generator().manual_seed(2)
    return fn, (torch.randn(4, width, generator=g, requires_grad=True),
                torch.randn(width, width, generator=g, requires_grad=True))


def extra_op_on(rank: int):
    """mlp_allreduce with one more op on `rank`: the ranks' graphs differ."""

    def fn(x, buf, w):
        s = funcol.all_reduce(buf, "sum", dist.group.WORLD)
        h = torch.relu(x @ w) * s
        if dist.get_rank() == rank:
            h = h.exp()
        return h.sin().sum()

    g = torch.Generator().manual_seed(3)
    return fn, (torch.randn(4, 16, generator=g, requires_grad=True), torch.randn(16, generator=g),
                torch.randn(16, 16, generator=g, requires_grad=True))


# --- running both partitioners -----------------------------------------------------------


@dataclasses.dataclass
class Run:
    forward: list[str]
    backward: list[str]
    collectives: list[tuple[str, Any]]  # (call, what this rank sent)
    artifacts: list[str]                # payloads of the sync artifact


def _lines(gm: fx.GraphModule) -> list[str]:
    return [str(n.format_node()) for n in gm.graph.nodes]


@contextlib.contextmanager
def recording(collectives: list, artifacts: list):
    """Records this rank's collective payloads and the sync artifacts, for
    torch's partitioner and remat's alike (both call torch.distributed and
    torch._logging.trace_structured)."""
    import torch._functorch.partitioners as tp
    import torch._logging

    gather, reduce = dist.all_gather_object, dist.all_reduce
    tp_trace, trace = tp.trace_structured, torch._logging.trace_structured

    def all_gather_object(out, obj, *a, **k):
        collectives.append(("all_gather_object", obj))
        return gather(out, obj, *a, **k)

    def all_reduce(t, *a, **k):
        collectives.append(("all_reduce", t.tolist()))
        return reduce(t, *a, **k)

    def traced(kind, *a, **k):
        metadata_fn, payload_fn = k.get("metadata_fn"), k.get("payload_fn")
        if metadata_fn is not None and metadata_fn().get("name") == ARTIFACT:
            artifacts.append(payload_fn())
        return trace(kind, *a, **k)

    dist.all_gather_object, dist.all_reduce = all_gather_object, all_reduce
    tp.trace_structured = torch._logging.trace_structured = traced
    try:
        yield
    finally:
        dist.all_gather_object, dist.all_reduce = gather, reduce
        tp.trace_structured, torch._logging.trace_structured = tp_trace, trace


def run(partition_fn: Callable, joint: Joint, **config: Any) -> Run:
    import torch._functorch.config as fconfig

    collectives: list = []
    artifacts: list = []
    module = joint.fresh()
    with fconfig.patch(**config), recording(collectives, artifacts), joint.fake_mode:
        fw, bw = partition_fn(module, None, **joint.kwargs)
    return Run(_lines(fw), _lines(bw), collectives, artifacts)


def partitioners(kind: str) -> tuple[Callable, Callable]:
    """(torch's, remat's) partition functions of one kind."""
    import torch._functorch.partitioners as tp

    import remat.torch as rt

    if kind == "min_cut":
        return tp.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition
    return tp.default_partition, rt.default_partition
