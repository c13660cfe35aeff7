"""Joint graphs for the benchmarks, captured from torch 2.13.

Contract: each builder returns a `Joint` (the joint GraphModule torch hands its
partitioner, with the keyword arguments it passes). Graphs are captured with
aot_module and a partition function that records the joint graph and stops
the compilation, so capturing never pays for torch's own partitioner.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Joint:
    name: str
    gm: torch.fx.GraphModule
    kwargs: dict[str, Any]  # num_fwd_outputs, static_lifetime_input_indices

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


CASES: dict[str, Callable[[], Joint]] = {
    **{f"sequential_weights_{n}": (lambda n=n: sequential_weights(n)) for n in (100, 1000, 5000)},
    **{f"parallel_chains_{c}": (lambda c=c: parallel_chains(c)) for c in (32, 128, 512)},
    **{f"transformer_{n}": (lambda n=n: transformer_stack(n)) for n in (1, 4, 16, 48, 96)},
}

# Tiny sizes for the CI smoke run of the harness.
SMOKE: dict[str, Callable[[], Joint]] = {
    "sequential_weights_10": lambda: sequential_weights(10),
    "parallel_chains_8": lambda: parallel_chains(8),
    "transformer_1": lambda: transformer_stack(1),
}
