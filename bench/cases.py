"""Joint graphs for the benchmarks, captured from torch 2.13.

Contract: each builder returns a `Joint` (the joint GraphModule torch hands its
partitioner, with the keyword arguments it passes). Graphs are captured with
aot_function (static shapes) or torch.compile (dynamic shapes, where dynamo
makes sizes symbolic) and a partition function that records the joint graph
and stops the compilation, so capturing never pays for torch's own
partitioner. `BOTH_PARTITIONERS` lists the cases also timed with
default_partition, `FP8` those also timed under FP8 activation quantization.
The RNG rewrites' cases are the stored joint graphs with CUDA metadata of
tests/python/rng_graphs.py (a CPU cannot trace them), each partitioned in the
context AOTAutograd partitions in.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import sys
from typing import Any, Callable, ContextManager, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Joint:
    name: str
    gm: torch.fx.GraphModule
    kwargs: dict[str, Any]  # num_fwd_outputs, static_lifetime_input_indices
    # The context torch partitions this graph in (None: the caller's own).
    context: Optional[Callable[[], ContextManager[Any]]] = None
    # A fresh joint module for each run (None: a deep copy of gm).
    fresh: Optional[Callable[[], torch.fx.GraphModule]] = None

    def copy(self) -> torch.fx.GraphModule:
        return self.fresh() if self.fresh is not None else copy.deepcopy(self.gm)

    def partition_context(self) -> ContextManager[Any]:
        return self.context() if self.context is not None else contextlib.nullcontext()

    @property
    def nodes(self) -> int:
        return len(self.gm.graph.nodes)


class _Captured(Exception):
    pass


def capture(fn: Callable[..., Any], *args: torch.Tensor, name: str) -> Joint:
    """Traces fn's joint graph with aot_function and returns it."""
    from torch._functorch.aot_autograd import aot_function

    box: dict[str, Any] = {}

    def record(gm, joint_inputs, **kwargs):
        box["joint"] = Joint(name, gm, {k: v for k, v in kwargs.items() if k != "compiler"})
        raise _Captured

    compiled = aot_function(fn, fw_compiler=lambda g, _: g, bw_compiler=lambda g, _: g,
                            partition_fn=record)
    with contextlib.suppress(_Captured):
        compiled(*args)
    return box["joint"]


def capture_compiled(model: nn.Module, *args: torch.Tensor, name: str, dynamic: bool = True) -> Joint:
    """The joint graph torch.compile(dynamic=...) hands the partitioner."""
    from torch._dynamo.backends.common import aot_autograd

    box: dict[str, Any] = {}

    def record(gm, joint_inputs, **kwargs):
        box["joint"] = Joint(name, gm, {k: v for k, v in kwargs.items() if k != "compiler"})
        raise _Captured

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=lambda g, _: g, partition_fn=record)
    try:
        torch.compile(model, backend=backend, dynamic=dynamic)(*args)
    except Exception:  # dynamo wraps _Captured in BackendCompilerFailed
        if "joint" not in box:
            raise
    finally:
        torch._dynamo.reset()
    return box["joint"]


def sequential_weights(n: int) -> Joint:
    """torch's partitioner compile benchmark: one input, n weights in sequence,
    matmul (never recomputed) then two sins (recomputable)."""
    weights = [torch.randn(16, 16, requires_grad=True) for _ in range(n)]
    inp = torch.randn(16, 16)

    def f(inp, *ws):
        x = inp
        for w in ws:
            x = torch.matmul(w, x).sin().sin()
        return x

    return capture(f, inp, *weights, name=f"sequential_weights_{n}")


def parallel_chains(chains: int) -> Joint:
    """The shape of torch issue #145081 ("partitioner hangs for some long
    chains of ops with many users"), with `chains` parallel use chains."""

    def f(x):
        tmps = [x + i for i in range(chains)]
        tmps = [x + tmp for tmp in tmps]
        for i in range(len(tmps) - 4):
            tmps[i] = tmps[i].sin().mul(tmps[i])
            tmps[i + 1] = tmps[i + 1] - tmps[i]
            tmps[i + 2] = tmps[i + 2] - tmps[i]
            tmps[i + 3] = tmps[i + 3] - tmps[i]
        return sum(tmps)

    return capture(f, torch.randn(4, 4, requires_grad=True), name=f"parallel_chains_{chains}")


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


def transformer_stack(layers: int, dim: int = 32, heads: int = 4) -> Joint:
    """A stack of pre-norm transformer blocks: SDPA attention, GELU MLP, LayerNorm."""
    model = nn.Sequential(*[_Block(dim, heads) for _ in range(layers)])
    params = dict(model.named_parameters())
    names = list(params)
    x = torch.randn(2, 8, dim)

    def f(x, *ps):
        out = torch.func.functional_call(model, dict(zip(names, ps)), (x,))
        return out.sum()

    return capture(f, x, *params.values(), name=f"transformer_{layers}")


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18's layout (four stages of two basic blocks, BatchNorm in
    training mode), narrow so that capturing stays fast."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for stage, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            blocks += [_BasicBlock(cin, cout, 1 if stage == 0 else 2), _BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def resnet18(dynamic: bool) -> Joint:
    torch.manual_seed(0)
    model, x = ResNet18(), torch.randn(2, 3, 32, 32)
    # Compiled as a module: its BatchNorm buffers are mutated in place.
    return capture_compiled(model, x, name="resnet18" + ("_dynamic" if dynamic else ""),
                            dynamic=dynamic)


def transformer_dynamic(layers: int, dim: int = 32, heads: int = 4) -> Joint:
    """transformer_stack's model, compiled with dynamic shapes (symbolic
    batch and sequence length)."""
    torch.manual_seed(0)
    model = nn.Sequential(*[_Block(dim, heads) for _ in range(layers)])
    return capture_compiled(model, torch.randn(2, 8, dim), name=f"transformer_{layers}_dynamic")


def stored_rng(name: str, row: str, **config: Any) -> Joint:
    """A stored joint graph with CUDA metadata (tests/data/rng) under torch
    config `config`: the RNG rewrites' rows."""
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python")
    sys.path.insert(0, tests)
    try:
        import rng_graphs
    finally:
        sys.path.pop(0)
    stored = rng_graphs.load(name)
    return Joint(row, stored.fresh(), stored.partition_kwargs(),
                 context=lambda: rng_graphs.partition_context(stored, **config), fresh=stored.fresh)


# One row per RNG rewrite: graph-safe functionalization (CUDA's default), the
# CPU-style path it falls back to, philox seeds/offsets, and HOP threading.
RNG_CASES: dict[str, Callable[[], Joint]] = {
    "rng_graphsafe_attention": lambda: stored_rng("attention_dropout", "rng_graphsafe_attention"),
    "rng_cpu_style_attention": lambda: stored_rng(
        "attention_dropout", "rng_cpu_style_attention", graphsafe_rng_functionalization=False),
    "rng_philox_attention": lambda: stored_rng("philox_attention", "rng_philox_attention"),
    "rng_hop_dropout": lambda: stored_rng("hop_dropout", "rng_hop_dropout"),
}

CASES: dict[str, Callable[[], Joint]] = {
    **{f"sequential_weights_{n}": (lambda n=n: sequential_weights(n)) for n in (100, 1000, 5000)},
    **{f"parallel_chains_{c}": (lambda c=c: parallel_chains(c)) for c in (32, 128, 512)},
    **{f"transformer_{n}": (lambda n=n: transformer_stack(n)) for n in (1, 4, 16, 48, 96)},
    "resnet18": lambda: resnet18(dynamic=False),
    "resnet18_dynamic": lambda: resnet18(dynamic=True),
    "transformer_1_dynamic": lambda: transformer_dynamic(1),
    "transformer_4_dynamic": lambda: transformer_dynamic(4),
    **RNG_CASES,
}

# Cases also timed with default_partition (torch's choice without a min-cut:
# inference-style compiles and graphs with nothing to recompute).
BOTH_PARTITIONERS = {"transformer_4", "resnet18", "resnet18_dynamic", "transformer_1_dynamic",
                     "transformer_4_dynamic", "transformer_1", *RNG_CASES}

# --- post-cut rewrites ---------------------------------------------------


def _benchmark_stand_in(node: torch.fx.Node, *args: Any, **kwargs: Any) -> float:
    """torch's reload prefetch benchmarks backward compute nodes on the device;
    both partitioners call this instead (a fixed 10 us), so the rows time
    partitioning, not kernels."""
    return 0.01


def offloading(joint: Joint, **flags: Any) -> tuple[Joint, dict[str, Any], Any]:
    """The joint graph with every call_function marked should_offload (as a
    joint_custom_pass would), the config turning offloading on, and the
    context that stands in for torch's on-device benchmark."""
    from unittest import mock

    gm = copy.deepcopy(joint.gm)
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.meta["should_offload"] = True
    context = mock.patch(
        "torch._functorch._activation_offloading.activation_offloading.benchmark_node", _benchmark_stand_in)
    return Joint(joint.name, gm, joint.kwargs), {"enable_activation_offloading": True, **flags}, context


REWRITES: dict[str, Callable[[Joint], tuple[Joint, dict[str, Any], Any]]] = {
    "offload": offloading,
    "offload async+sink+prefetch": lambda j: offloading(
        j, activation_offload_separate_stream=True, activation_offload_sink_wait=True,
        activation_reload_prefetch=True),
}
# torch 2.11's separate-stream offloading numbers its streams from dynamo's
# registry (and needs the device to create them); remat refuses it
# (docs/torch-releases.md), so only 2.12 on times it.
_ASYNC_OFFLOAD = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 12)
# case -> (rewrite, partitioner) rows
REWRITE_ROWS: dict[str, tuple[tuple[str, str], ...]] = {
    "transformer_1": (("offload", "min_cut"),
                      *((("offload async+sink+prefetch", "min_cut"),) if _ASYNC_OFFLOAD else ())),
    "transformer_4": (("offload", "min_cut"),
                      *((("offload async+sink+prefetch", "min_cut"),) if _ASYNC_OFFLOAD else ()),
                      ("offload", "default")),
    "transformer_96": (("offload", "min_cut"),
                       *((("offload async+sink+prefetch", "min_cut"),) if _ASYNC_OFFLOAD else ())),
}

# Cases also timed under inductor's FP8 activation quantization pass
# (bench_partition.FP8), which torch's extraction runs for both partitioners.
FP8 = {"transformer_1", "transformer_4", "resnet18"}

# Tiny sizes for the CI smoke run of the harness.
SMOKE: dict[str, Callable[[], Joint]] = {
    "sequential_weights_10": lambda: sequential_weights(10),
    "parallel_chains_8": lambda: parallel_chains(8),
    "transformer_1": lambda: transformer_stack(1),
    "transformer_1_dynamic": lambda: transformer_dynamic(1),
    "rng_hop_dropout": RNG_CASES["rng_hop_dropout"],
}
