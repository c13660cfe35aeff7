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
import logging
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


def mlp_allreduce(width: int = 16, depth: int = 4, batch: int = 8):
    """An MLP scaled by an all-reduced statistic: collectives in the forward."""

    def fn(x, buf, *ws):
        s = funcol.all_reduce(buf, "sum", dist.group.WORLD)
        h = x
        for i, w in enumerate(ws):
            h = h @ w
            h = torch.relu(h) * s if i % 2 == 0 else torch.sigmoid(h).sin() + s
        return h.sum()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, width, generator=g, requires_grad=True)
    ws = [torch.randn(width, width, generator=g, requires_grad=True) for _ in range(depth)]
    buf = torch.randn(width, generator=g)
    return fn, (x, buf, *ws)


def fsdp_like(width: int = 16, shard_rows: int = 8, batch: int = 4):
    """Weights all-gathered in the forward and gradients reduce-scattered in the
    backward (the autograd-aware functional collectives): collectives on both
    sides, as FSDP's. `batch` may differ per rank: it changes the sizes of the
    activations, not the graph's structure (shards must match across ranks)."""

    # 2.13 added all_gather_single_autograd; before, the tensor variant is
    # the autograd-aware one.
    gather = getattr(funcol, "all_gather_single_autograd", None) or \
        funcol.all_gather_tensor_autograd

    def fn(x, w1_shard, w2_shard):
        w1 = gather(w1_shard, 0, dist.group.WORLD)
        h = torch.tanh(x @ w1.t())
        w2 = gather(w2_shard, 0, dist.group.WORLD)
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


def branches(swap: bool):
    """Two independent branches of the input (sin and cos) and an all-reduce:
    `swap` traces cos before sin, the same graph in another node order (what
    ranks iterating a dict in another order get). torch 2.13 on names nodes
    canonically and still recognises it; 2.11 and 2.12 hash the node names in
    graph order and do not."""

    def fn(x, buf):
        s = funcol.all_reduce(buf, "sum", dist.group.WORLD)
        if swap:
            b = x.cos()
            a = x.sin()
        else:
            a = x.sin()
            b = x.cos()
        return ((a + s) * b.exp()).sum()

    g = torch.Generator().manual_seed(4)
    return fn, (torch.randn(16, generator=g, requires_grad=True), torch.randn(16, generator=g))


def getitems(width: int = 16):
    """An all-reduce and ops that return tuples (var_mean, max.dim), read by
    operator.getitem: a Python callable among the targets, which torch up to
    2.13 hashes by str() ("<built-in function getitem>") and 2.14 on by FX's
    qualified name ("_operator.getitem")."""

    def fn(x, buf, w):
        s = funcol.all_reduce(buf, "sum", dist.group.WORLD)
        var, mean = torch.var_mean(x, dim=0)
        h = torch.relu(((x - mean) * var.rsqrt()) @ w) * s
        top, _ = torch.max(h.sigmoid(), dim=1)
        return (top.exp() + h.sin().sum(1)).sum()

    g = torch.Generator().manual_seed(5)
    return fn, (torch.randn(8, width, generator=g, requires_grad=True),
                torch.randn(width, generator=g),
                torch.randn(width, width, generator=g, requires_grad=True))


def tag_must_save(joint: "Joint", target: Any) -> None:
    """Tags the first node calling `target` MUST_SAVE (what a checkpoint
    policy writes): this rank's own decision then differs from the others'."""
    from torch.utils.checkpoint import CheckpointPolicy

    for node in joint.module.graph.nodes:
        if node.op == "call_function" and node.target is target:
            node.meta["recompute"] = CheckpointPolicy.MUST_SAVE
            return
    raise AssertionError(f"{joint.name}: no call of {target}")


# --- running both partitioners -----------------------------------------------------------


@dataclasses.dataclass
class Run:
    forward: list[str]
    backward: list[str]
    collectives: list[tuple[str, Any, str]]  # (call, what this rank sent, on which group)
    artifacts: list[str]                     # payloads of the sync artifact
    debug: list[str] = dataclasses.field(default_factory=list)  # torch's partitioner's
    # DEBUG lines about the sync ("Skipping sync decision cross rank ...")
    error: str = ""  # "Type: message" when the partition raised (forward, backward empty)


def group_name(group: Any) -> str:
    """How a collective's process group is recorded: "default" for
    torch.distributed's default group, "pg <name> <tag>" for any other
    (torch 2.15's compile-sync group is tagged "pt2_compile_sync_pg")."""
    if group is None or group is dist.group.WORLD:
        return "default"
    tag = getattr(dist.distributed_c10d, "_get_group_tag", lambda g: "")(group)
    return f"pg {group.group_name} {tag}".strip()


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

    def all_gather_object(out, obj, group=None, *a, **k):
        collectives.append(("all_gather_object", obj, group_name(group)))
        return gather(out, obj, group, *a, **k)

    def all_reduce(t, op=dist.ReduceOp.SUM, group=None, *a, **k):
        collectives.append(("all_reduce", t.tolist(), group_name(group)))
        return reduce(t, op, group, *a, **k)

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


class _SyncDebugLines(logging.Handler):
    def __init__(self, lines: list):
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "sync decision cross rank" in message:
            self.lines.append(message)


@contextlib.contextmanager
def debug_lines(lines: list):
    """Collects the sync's DEBUG lines of torch's partitioner logger, which
    remat's drop-in logs through too."""
    logger = logging.getLogger("torch._functorch.partitioners")
    handler, level = _SyncDebugLines(lines), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run(partition_fn: Callable, joint: Joint, *, expect_error: bool = False, **config: Any) -> Run:
    """One partition of a fresh copy of `joint` under the config patch,
    recording what it sent, logged and traced. With `expect_error`, an
    exception is recorded instead of raised."""
    import torch._functorch.config as fconfig

    collectives: list = []
    artifacts: list = []
    lines: list = []
    module = joint.fresh()
    with fconfig.patch(**config), recording(collectives, artifacts), debug_lines(lines), \
            joint.fake_mode:
        try:
            fw, bw = partition_fn(module, None, **joint.kwargs)
        except Exception as e:
            if not expect_error:
                raise
            return Run([], [], collectives, artifacts, lines, f"{type(e).__name__}: {e}")
    return Run(_lines(fw), _lines(bw), collectives, artifacts, lines)


def remat_with(**options: Any) -> Callable:
    """remat's min-cut drop-in with these engine options on top of the running
    config's (say torch_switches={"sync_canonical_names": False})."""
    def partition_fn(joint_module, _joint_inputs, **kwargs):
        p = _remat_partition(joint_module, kwargs, options)
        return p.forward, p.backward

    return partition_fn


def _remat_partition(joint_module: fx.GraphModule, kwargs: dict, options: dict) -> Any:
    """remat.torch.partition of a joint graph captured with `kwargs`, with
    these engine options on top of the running config's."""
    import remat.torch as rt

    return rt.partition(joint_module, num_fwd_outputs=kwargs["num_fwd_outputs"],
                        static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices"),
                        options=rt.options_from_torch(**options))


def peak_range(joint: Joint, search: str = "fast") -> tuple[int, int]:
    """remat's plain (unlimited) plan's simulated peak of `joint`, and the
    smallest peak `search` reaches (BudgetUnreachableError's at 1 byte)."""
    import remat

    def peak(**options: Any) -> int:
        module = joint.fresh()
        with joint.fake_mode:
            p = _remat_partition(module, joint.kwargs, options)
        return int(p.result["memory"]["peak_bytes"])

    try:
        peak(peak_memory_budget=1, peak_search=search)
    except remat.BudgetUnreachableError as e:
        return peak(), int(e.smallest_peak)
    raise AssertionError(f"{joint.name}: a 1-byte peak limit was met")


def partitioners(kind: str) -> tuple[Callable, Callable]:
    """(torch's, remat's) partition functions of one kind."""
    import torch._functorch.partitioners as tp

    import remat.torch as rt

    if kind == "min_cut":
        return tp.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition
    return tp.default_partition, rt.default_partition
