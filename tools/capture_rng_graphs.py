#!/usr/bin/env python3
"""Captures joint graphs whose metadata says CUDA, for the RNG rewrites' parity tests.

Contract: each case is a small model with random ops in checkpointed regions,
compiled with torch.compile on CPU (an aot_autograd backend whose partition
function is torch's own min-cut partitioner); every joint graph AOTAutograd
hands the partition function is *re-deviced* before torch partitions it: each
fake tensor of its meta (and of its nested graph modules) gets the device the
case assigns (cuda:0 by default), and device arguments follow. The outermost
joint graph is then exported in format v1 to tests/data/rng/<case>.json and
the compile is stopped (the graphs would not run on a CPU). Files are in
remat's canonical form; CASES documents each.

Why re-device instead of tracing CUDA fake tensors: on a CPU-only build of
torch, FakeTensorMode creates CUDA fake tensors and runs forward ops on them,
but autograd aborts the process (InputMetadata asks for a CUDA device guard)
as soon as a CUDA fake parameter requires grad, so AOTAutograd cannot trace
a CUDA joint graph. torch's partitioner decides on metadata only, so a CPU
capture with CUDA devices written into its metadata is what it would see on a
GPU, with two known differences kept out of these cases: device-specific
decompositions (none is used here) and ops that exist only on one device.

AOTAutograd adds what CUDA graphs need the same way on either device: the
graph-safe RNG placeholders are added by the partitioner itself (of the
outer graph, and of invoke_subgraph bodies, whose partitions run first and
are re-deviced the same way), and the philox path's seed/offset placeholders
by AOTAutograd when torch._functorch.config.functionalize_rng_ops is on
(its decompositions refuse non-CUDA devices, which is switched off while
tracing: the graph is re-deviced before anything reads it).

On a CPU-only build the CUDA runtime facts torch reads while partitioning
come from `cuda_stand_ins()` (also used by the tests): the default CUDA
generator's `clone_state()` (a torch.Generator reporting the CUDA device) and
`torch.cuda.get_rng_state()` (16 bytes: a Philox seed and offset).

  python tools/capture_rng_graphs.py [--out tests/data/rng] [--only case,...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import sys
import warnings
from typing import Any, Callable, Iterator, Optional

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import (  # noqa: E402
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

# --------------------------------------------------------------------------- CUDA stand-ins


class StandInCudaGeneratorState(torch.Generator):
    """What a CUDA generator's clone_state() returns, on a build without CUDA:
    a torch.Generator whose `device` is the CUDA device (torch's partitioner
    stores it as the graph-safe placeholders' meta["val"], and AOTAutograd
    reads its device)."""

    def __new__(cls, device: Any) -> "StandInCudaGeneratorState":
        self = super().__new__(cls)
        self._stand_in_device = torch.device(device)
        return self

    def __init__(self, device: Any) -> None:
        super().__init__()

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self._stand_in_device

    def __repr__(self) -> str:
        return f"StandInCudaGeneratorState({self._stand_in_device})"


class _StandInCudaGenerator:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def clone_state(self) -> StandInCudaGeneratorState:
        return StandInCudaGeneratorState(self.device)


# torch.cuda.get_rng_state(): a Philox generator's seed and offset, 8 bytes each.
CUDA_RNG_STATE_BYTES = 16
# The CUDA devices the stand-ins answer for (the stored graphs use cuda:0 and cuda:1).
STAND_IN_DEVICES = 8


@contextlib.contextmanager
def cuda_stand_ins() -> Iterator[None]:
    """The CUDA runtime facts torch's partitioner reads, on a CPU-only build.

    Does nothing where CUDA is available: the real generator answers.
    """
    if torch.cuda.is_available():
        yield
        return

    def get_generator(device: Any) -> _StandInCudaGenerator:
        device = torch.device(device)
        if device.index is None:
            device = torch.device(device.type, 0)
        return _StandInCudaGenerator(device)

    def get_rng_state(device: Any = "cuda") -> torch.Tensor:
        return torch.zeros(CUDA_RNG_STATE_BYTES, dtype=torch.uint8)

    # torch 2.11 and 2.12 read the generators from torch.cuda.default_generators
    # (get_cuda_generator_meta_val); 2.13 on through _get_generator.
    generators = tuple(_StandInCudaGenerator(torch.device("cuda", i)) for i in range(STAND_IN_DEVICES))
    saved = (torch.cuda._get_generator, torch.cuda.get_rng_state, torch.cuda.default_generators)
    torch.cuda._get_generator, torch.cuda.get_rng_state = get_generator, get_rng_state
    torch.cuda.default_generators = generators
    try:
        yield
    finally:
        torch.cuda._get_generator, torch.cuda.get_rng_state, torch.cuda.default_generators = saved


# --------------------------------------------------------------------------- re-deviceing

DeviceRule = Callable[[fx.Node, list[int]], str]


def all_on(device: str) -> DeviceRule:
    return lambda node, regions: device


def by_region(*devices: str) -> DeviceRule:
    """The k-th checkpoint region (by ac_graph_id, in increasing order) on
    devices[k]; nodes outside any region on devices[0]."""

    def rule(node: fx.Node, regions: list[int]) -> str:
        gid = node.meta.get("ac_graph_id")
        if gid is None or gid not in regions:
            return devices[0]
        return devices[min(regions.index(gid), len(devices) - 1)]

    return rule


def _graphs(gm: fx.GraphModule) -> list[fx.Graph]:
    return [m.graph for m in gm.modules() if isinstance(m, fx.GraphModule)]


def _cpu_scalar(t: torch.Tensor) -> bool:
    """An int64 scalar on the CPU: the philox path's seeds and offsets (and
    offsets computed from them) stay there on a GPU too."""
    return t.device.type == "cpu" and t.dim() == 0 and t.dtype == torch.int64


def redevice(gm: fx.GraphModule, rule: DeviceRule) -> None:
    """Rewrites the devices of every fake tensor in the meta of gm's graphs
    (nested graph modules included), and of device arguments, by `rule`;
    int64 CPU scalars stay (see _cpu_scalar)."""
    graphs = _graphs(gm)
    regions = sorted({n.meta["ac_graph_id"] for g in graphs for n in g.nodes
                      if isinstance(n.meta.get("ac_graph_id"), int)})
    for g in graphs:
        for node in g.nodes:
            device = torch.device(rule(node, regions))
            for leaf in torch.utils._pytree.tree_leaves(node.meta.get("val")):
                if isinstance(leaf, torch._subclasses.FakeTensor) and not _cpu_scalar(leaf):
                    leaf.fake_device = device

            def swap(a: Any) -> Any:
                return device if isinstance(a, torch.device) and a.type == "cpu" else a

            node.args = fx.node.map_aggregate(node.args, swap)
            node.kwargs = fx.node.map_aggregate(node.kwargs, swap)


# --------------------------------------------------------------------------- models


class CheckpointDropout(nn.Module):
    """Linear -> gelu -> dropout -> linear inside checkpoint, then a head."""

    def __init__(self, regions: int = 1, p: float = 0.25) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
                                    for _ in range(regions))
        self.head = nn.Linear(16, 4)
        self.p = p

    def block(self, i: int, x: torch.Tensor) -> torch.Tensor:
        a, b = self.blocks[i]
        h = F.dropout(F.gelu(a(x)), self.p, training=True)
        return torch.sin(b(h)) * h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(len(self.blocks)):
            x = checkpoint(self.block, i, x, use_reentrant=False)
        return self.head(x.relu())


class CheckpointAttention(nn.Module):
    """A checkpointed attention block with dropout on the attention
    probabilities and on the MLP output (written out: no fused SDPA kernel,
    whose dropout differs per device)."""

    def __init__(self, d: int = 16, heads: int = 2, p: float = 0.1) -> None:
        super().__init__()
        self.heads, self.p = heads, p
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def block(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = (q @ k.transpose(-1, -2)) * (d // self.heads) ** -0.5
        att = F.dropout(att.softmax(dim=-1), self.p, training=True)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + F.dropout(self.mlp(self.ln2(x)), self.p, training=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.block, x, use_reentrant=False)


def _save_mm(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


class SelectiveDropout(CheckpointDropout):
    """CheckpointDropout under a selective policy: matmuls saved, the rest
    (dropout included) recomputed."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(len(self.blocks)):
            # A partial, not a lambda: dynamo traces only those as context_fn.
            x = checkpoint(self.block, i, x, use_reentrant=False,
                           context_fn=functools.partial(create_selective_checkpoint_contexts, _save_mm))
        return self.head(x.relu())


@torch.compiler.nested_compile_region
def _region(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    def inner(x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(torch.relu(x @ w1), 0.25, training=True)
        return torch.sin(h @ w2) * h

    return checkpoint(inner, x, use_reentrant=False)


class HopRegions(nn.Module):
    """A nested compile region (invoke_subgraph) with checkpointed dropout
    inside, called `calls` times; with `outer_dropout` the outer graph has a
    checkpointed dropout of its own too."""

    def __init__(self, calls: int = 2, outer_dropout: bool = False) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(16, 16) * 0.3)
        self.w2 = nn.Parameter(torch.randn(16, 16) * 0.3)
        self.head = nn.Linear(16, 4)
        self.calls, self.outer_dropout = calls, outer_dropout

    def outer(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(torch.tanh(self.head(x)), 0.25, training=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.calls):
            x = _region(x, self.w1, self.w2)
        if self.outer_dropout:
            return checkpoint(self.outer, x, use_reentrant=False)
        return self.head(x)


# --------------------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class RngCase:
    name: str
    make_model: Callable[[], nn.Module]
    make_input: Callable[[], torch.Tensor]
    devices: DeviceRule = all_on("cuda:0")
    decompositions: Optional[str] = None  # "inductor": inductor's table
    philox: bool = False                   # torch._functorch.config.functionalize_rng_ops
    doc: str = ""


def _x(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape, generator=torch.Generator().manual_seed(1)).requires_grad_()


CASES = [
    RngCase("ckpt_dropout", lambda: CheckpointDropout(1), _x(4, 16),
            doc="one checkpointed dropout (aten.native_dropout) on cuda:0"),
    RngCase("ckpt_dropout_inductor", lambda: CheckpointDropout(1), _x(4, 16), decompositions="inductor",
            doc="the same through inductor's decompositions (rand-based dropout)"),
    RngCase("two_regions", lambda: CheckpointDropout(2), _x(4, 16),
            doc="two checkpointed regions with dropout, both on cuda:0"),
    RngCase("attention_dropout", CheckpointAttention, _x(2, 4, 16),
            doc="a checkpointed attention block, dropout on probabilities and MLP"),
    RngCase("selective_dropout", lambda: SelectiveDropout(2), _x(4, 16),
            doc="selective checkpointing: matmuls MUST_SAVE, dropout PREFER_RECOMPUTE"),
    RngCase("two_devices", lambda: CheckpointDropout(2), _x(4, 16), devices=by_region("cuda:0", "cuda:1"),
            doc="two regions on cuda:0 and cuda:1: torch falls back to the CPU-style path"),
    RngCase("cpu_and_cuda", lambda: CheckpointDropout(2), _x(4, 16), devices=by_region("cpu", "cuda:0"),
            doc="a region on the CPU and one on cuda:0: each random op takes its own path"),
    RngCase("philox_dropout", lambda: CheckpointDropout(2), _x(4, 16), decompositions="inductor", philox=True,
            doc="functionalize_rng_ops: philox_rand with fwd/bwd seed and offset inputs"),
    RngCase("philox_attention", CheckpointAttention, _x(2, 4, 16), decompositions="inductor", philox=True,
            doc="the attention block under functionalize_rng_ops"),
    RngCase("hop_dropout", lambda: HopRegions(2), _x(4, 16),
            doc="an invoke_subgraph region with checkpointed dropout, called twice"),
    RngCase("hop_and_outer_dropout", lambda: HopRegions(2, outer_dropout=True), _x(4, 16),
            doc="an invoke_subgraph region with dropout, called twice, and a checkpointed dropout outside it"),
]
CASES_BY_NAME = {c.name: c for c in CASES}


class _Captured(Exception):
    """Stops the compile once the outer joint graph is recorded."""


@contextlib.contextmanager
def _philox(on: bool) -> Iterator[None]:
    """functionalize_rng_ops with its decompositions accepting CPU tensors
    while tracing (the graph is re-deviced before anything reads it)."""
    if not on:
        yield
        return
    import torch._decomp.decompositions_for_rng as rng_decomps
    from torch._prims_common import CUDARngStateHelper

    def state_as_tuple(fake_mode: Any = contextlib.nullcontext()) -> tuple:
        # The CUDA generator's seed and offset, as CPU scalar tensors.
        with fake_mode:
            return torch.tensor(0), torch.tensor(0)

    saved = rng_decomps.throw_on_non_cuda, CUDARngStateHelper.get_torch_state_as_tuple
    rng_decomps.throw_on_non_cuda = lambda device: None
    CUDARngStateHelper.get_torch_state_as_tuple = staticmethod(state_as_tuple)
    try:
        with torch._functorch.config.patch(functionalize_rng_ops=True):
            yield
    finally:
        rng_decomps.throw_on_non_cuda = saved[0]
        CUDARngStateHelper.get_torch_state_as_tuple = staticmethod(saved[1])


def capture(case: RngCase) -> dict:
    """The case's outermost joint graph, re-deviced, as a format-v1 document."""
    import torch._functorch._aot_autograd.graph_compile as graph_compile
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from remat.torch._fx_to_json import export_joint_graph

    in_hop = [0]
    docs: list[dict] = []
    original_hops = graph_compile.run_joint_graph_passes_on_hops

    def hops(*args: Any, **kwargs: Any) -> Any:
        in_hop[0] += 1
        try:
            return original_hops(*args, **kwargs)
        finally:
            in_hop[0] -= 1

    def partition(joint: fx.GraphModule, inputs: Any, **kwargs: Any):
        redevice(joint, case.devices)
        if in_hop[0]:  # an invoke_subgraph body: partitioned, then stitched in
            return min_cut_rematerialization_partition(joint, inputs, **kwargs)
        docs.append(export_joint_graph(joint, kwargs["num_fwd_outputs"],
                                       kwargs.get("static_lifetime_input_indices")))
        raise _Captured

    decomps = None
    if case.decompositions == "inductor":
        from torch._inductor.decomposition import select_decomp_table

        decomps = select_decomp_table()
    backend = aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm.forward),
                           partition_fn=partition, decompositions=decomps)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = case.make_model()
    graph_compile.run_joint_graph_passes_on_hops = hops
    try:
        with cuda_stand_ins(), _philox(case.philox):
            try:
                torch.compile(model, backend=backend)(case.make_input()).sum().backward()
            except Exception as e:  # dynamo wraps _Captured
                if not docs:
                    raise
                del e
    finally:
        graph_compile.run_joint_graph_passes_on_hops = original_hops
        torch._dynamo.reset()
    if len(docs) != 1:
        raise RuntimeError(f"{case.name}: expected one outer joint graph, got {len(docs)}")
    return docs[0]


def main() -> int:
    import remat

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "rng"))
    p.add_argument("--only", default="", help="comma-separated case names")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    os.makedirs(args.out, exist_ok=True)
    wanted = {s for s in args.only.split(",") if s}
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        doc = capture(case)
        path = os.path.join(args.out, f"{case.name}.json")
        # remat's canonical form: one node per line, the same bytes for the
        # same graph (the tests rebuild everything from it).
        data = remat.roundtrip(doc)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        subs = len(doc.get("subgraphs", []))
        print(f"{path}: {len(doc['nodes'])} nodes, {subs} subgraphs, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
