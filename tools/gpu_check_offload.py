#!/usr/bin/env python3
"""Activation offloading on a real GPU: remat's partitioner against torch's.

For each model, partitioner (min-cut, default) and offloading configuration
(synchronous device_put; async ao.offload/ao.reload with and without wait
sinking and reload prefetch), the script trains a few steps twice from the
same weights and data: once with torch 2.13's partitioner, once through
`remat.torch.install(fallback=False)` (so remat partitions every graph, or
the run fails). A joint_custom_pass marks the activations to offload, as
torch's own tests do. It then checks, step by step, that

  * the losses and the gradients agree (--rtol/--atol; same graphs and
    kernels, so they normally agree exactly),
  * the forward and backward graphs agree node by node (tests/python/parity.py),
    and contain the offload and reload ops,
  * remat, not torch, partitioned the second run.

The reload prefetch times backward nodes with torch's benchmark_node, whose
results torch caches by op and shapes: the remat run reads the times the
torch run measured, so both place the reloads the same way.

  python tools/gpu_check_offload.py                   # needs a CUDA device
  python tools/gpu_check_offload.py --device cpu      # dry run: synchronous variants only

Exit status: 0 all agree, 1 a mismatch, 2 no CUDA device (without --device cpu).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import warnings
from typing import Any, Callable
from unittest import mock

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
try:
    import remat  # noqa: F401  (an installed copy, with its extension, wins)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import torch._functorch.config as functorch_config  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._functorch import partitioners  # noqa: E402

import parity  # noqa: E402
import remat.torch as rt  # noqa: E402
from remat.torch import _dropin  # noqa: E402

ASYNC = {"activation_offload_separate_stream": True}
VARIANTS: dict[str, dict[str, Any]] = {
    "sync": {},
    "async": ASYNC,
    "async+sink": {**ASYNC, "activation_offload_sink_wait": True},
    "async+prefetch": {**ASYNC, "activation_reload_prefetch": True},
    "async+sink+prefetch": {**ASYNC, "activation_offload_sink_wait": True, "activation_reload_prefetch": True},
}
OFFLOAD_OPS = ("prims.device_put.default", "ao.offload.default", "ao.reload.default")


class MLP(nn.Module):
    def __init__(self, d: int = 256, h: int = 1024) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, h), nn.Linear(h, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(torch.relu(self.fc1(x)))))


class Block(nn.Module):
    """A transformer block without dropout (random ops take the RNG path,
    checked by the graph-safe RNG work)."""

    def __init__(self, d: int = 256, heads: int = 8) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[str], torch.Tensor]]] = {
    "mlp": (MLP, lambda dev: torch.randn(64, 256, device=dev)),
    "transformer_block": (Block, lambda dev: torch.randn(4, 128, 256, device=dev)),
}

def mark_for_offloading(gm: torch.fx.GraphModule, _joint_inputs: Any) -> torch.fx.GraphModule:
    """The joint_custom_pass: ask for every op's output; torch's own checks
    then keep the saved, contiguous, non-view ones."""
    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.meta["should_offload"] = True
    return gm


def train(model: nn.Module, x: torch.Tensor, steps: int, partition_fn: Callable, config: dict) -> dict:
    """`steps` SGD steps of the compiled model; the losses, gradients and graphs."""
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, _inputs: Any):
        from functorch.compile import make_boxed_func

        graphs.append(copy.deepcopy(gm))
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, partition_fn=partition_fn)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    losses, grads = [], []
    patch = {"enable_activation_offloading": True, "joint_custom_pass": mark_for_offloading, **config}
    with functorch_config.patch(patch):
        for _ in range(steps):
            opt.zero_grad()
            loss = compiled(x).float().pow(2).mean()
            loss.backward()
            losses.append(loss.detach().clone())
            grads.append([p.grad.detach().clone() for p in model.parameters()])
            opt.step()
    if x.is_cuda:
        torch.cuda.synchronize()
    return {"losses": losses, "grads": grads, "graphs": graphs}


def compare(name: str, theirs: dict, ours: dict, rtol: float, atol: float) -> list[str]:
    problems = []
    for step, (a, b) in enumerate(zip(theirs["losses"], ours["losses"])):
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            problems.append(f"{name}: step {step}: loss torch {a.item()!r} vs remat {b.item()!r}")
    for step, (ga, gb) in enumerate(zip(theirs["grads"], ours["grads"])):
        for k, (a, b) in enumerate(zip(ga, gb)):
            if not torch.allclose(a, b, rtol=rtol, atol=atol):
                diff = (a - b).abs().max().item()
                problems.append(f"{name}: step {step}: gradient {k} differs (max abs diff {diff:g})")
    if len(theirs["graphs"]) != len(ours["graphs"]):
        problems.append(f"{name}: torch compiled {len(theirs['graphs'])} graphs, remat {len(ours['graphs'])}")
    for k, (a, b) in enumerate(zip(theirs["graphs"], ours["graphs"])):
        diff = parity.graph_diff(a, b, f"{name} graph {k}")
        if diff:
            problems.append(diff)
    for who, run in (("torch", theirs), ("remat", ours)):
        targets = {parity.target_key(n.target).removeprefix("op:") for g in run["graphs"] for n in g.graph.nodes}
        if not targets & set(OFFLOAD_OPS):
            problems.append(f"{name}: no offload or reload op in {who}'s graphs")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (synchronous variants only)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--only", nargs="*", help="model names")
    a = p.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check_offload: no CUDA device; nothing checked", file=sys.stderr)
        return 2
    variants = VARIANTS if a.device.startswith("cuda") else {"sync": VARIANTS["sync"]}
    warnings.filterwarnings("ignore")
    problems: list[str] = []
    runs = 0
    for model_name, (make_model, make_input) in MODELS.items():
        if a.only and model_name not in a.only:
            continue
        for part_name, torch_fn in (("min_cut", partitioners.min_cut_rematerialization_partition),
                                    ("default", partitioners.default_partition)):
            for variant, config in variants.items():
                label = f"{model_name}/{part_name}/{variant}"
                torch.manual_seed(0)
                model = make_model().to(a.device)
                x = make_input(a.device)
                theirs = train(copy.deepcopy(model), x, a.steps, torch_fn, config)
                rt.install(fallback=False)
                try:
                    with mock.patch.object(_dropin, "_partition", wraps=_dropin._partition) as spy:
                        ours = train(copy.deepcopy(model), x, a.steps, torch_fn, config)
                finally:
                    rt.uninstall()
                found = compare(label, theirs, ours, a.rtol, a.atol)
                if spy.call_count == 0:
                    found.append(f"{label}: remat never partitioned")
                problems += found
                runs += 1
                print(f"{label}: {'ok' if not found else 'MISMATCH'} "
                      f"(losses {[round(v.item(), 6) for v in ours['losses']]})", flush=True)
    for line in problems:
        print(line, file=sys.stderr)
    print(f"gpu_check_offload: {runs} runs on {a.device}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
