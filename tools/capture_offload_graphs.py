#!/usr/bin/env python3
"""Captures joint graphs for the activation-offloading parity tests.

Activation offloading moves CUDA activations to the CPU, but torch's
partitioner decides everything from metadata. This tool captures small
models' joint graphs on the CPU (torch.compile with an aot_autograd backend,
recorded by `remat.torch.capture()`), exports them in format v1 and
re-devices them: every tensor value and device argument on "cpu" moves to
"cuda:0" (the models use no random ops, so AOTAutograd would add nothing else
for CUDA). Then it marks nodes with meta["should_offload"] the way a
`torch._functorch.config.joint_custom_pass` would (each case's rule below).
tests/python/test_offload_parity.py imports the files back as joint graphs
with fake CUDA tensors and runs torch 2.13's partitioners on them live, next
to remat's. Re-running rewrites the files byte for byte the same for the same
torch version.

  python tools/capture_offload_graphs.py [--out tests/data/offload] [--only mlp]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import orjson  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts  # noqa: E402

import remat.torch as rt  # noqa: E402

DEVICE = "cuda:0"


class MLP(nn.Module):
    def __init__(self, d: int = 16, h: int = 48) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, h), nn.Linear(h, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(torch.relu(self.fc1(x))))).tanh()


class Attention(nn.Module):
    """Hand-written attention (no CPU-only SDPA kernel in the graph)."""

    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(F.relu(self.conv2(x)).mean(dim=(2, 3)))


def _save_mm(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


class SacBlocks(nn.Module):
    """Two checkpointed blocks whose matmuls are MUST_SAVE (selective AC)."""

    def __init__(self, d: int = 24) -> None:
        super().__init__()
        self.w = nn.ParameterList([nn.Parameter(torch.randn(d, d) / d**0.5) for _ in range(4)])

    def block(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.relu(x @ a) @ b) * x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx = functools.partial(create_selective_checkpoint_contexts, _save_mm)
        x = checkpoint(self.block, x, self.w[0], self.w[1], use_reentrant=False, context_fn=ctx)
        x = checkpoint(self.block, x, self.w[2], self.w[3], use_reentrant=False, context_fn=ctx)
        return x.cos()


# --- should_offload rules (what a joint_custom_pass would mark) --------------

def mark_all(node: torch.fx.Node) -> bool:
    """Every node: torch's checks then reject views, getitems, outputs ..."""
    return node.op in ("placeholder", "call_function")


def mark_compute(node: torch.fx.Node) -> bool:
    """The outputs of matmuls, convolutions and activations."""
    names = ("mm", "addmm", "bmm", "convolution", "relu", "gelu", "native_batch_norm", "_softmax")
    return node.op == "call_function" and getattr(node.target, "_opname", None) in names


def mark_must_save(node: torch.fx.Node) -> bool:
    """As torch's tag_all_offloadable_activations does with SAC: MUST_SAVE nodes."""
    return node.meta.get("recompute") == CheckpointPolicy.MUST_SAVE


CASES: dict[str, tuple[Callable[[], nn.Module], Callable[[], list], Callable[[torch.fx.Node], bool]]] = {
    "mlp_all": (MLP, lambda: [torch.randn(8, 16)], mark_all),
    "attention_all": (Attention, lambda: [torch.randn(2, 6, 32)], mark_all),
    "attention_compute": (Attention, lambda: [torch.randn(2, 6, 32)], mark_compute),
    "cnn_compute": (CNN, lambda: [torch.randn(2, 3, 8, 8)], mark_compute),
    "sac_must_save": (SacBlocks, lambda: [torch.randn(6, 24, requires_grad=True)], mark_must_save),
}


def _nop(gm: torch.fx.GraphModule, _inputs: Any) -> torch.fx.GraphModule:
    return gm


def capture(model: nn.Module, inputs: list) -> rt.CapturedJoint:
    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=_nop, bw_compiler=_nop, partition_fn=min_cut_rematerialization_partition)
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    with rt.capture() as session:
        compiled(*inputs).sum().backward()
    if len(session.captured) != 1:
        raise RuntimeError(f"expected one joint graph, captured {len(session.captured)}")
    return session.captured[0]


def redevice(x: Any) -> Any:
    """The document with every "cpu" tensor value and device argument on DEVICE."""
    if isinstance(x, list):
        return [redevice(v) for v in x]
    if not isinstance(x, dict):
        return x
    if x.get("kind") == "tensor" and x.get("device") == "cpu":
        return {**x, "device": DEVICE}
    if set(x) == {"device"} and x["device"] == "cpu":
        return {"device": DEVICE}
    return {k: redevice(v) for k, v in x.items()}


def build(name: str) -> dict:
    make_model, make_inputs, rule = CASES[name]
    torch.manual_seed(0)
    captured = capture(make_model(), make_inputs())
    marked = {n.name for n in captured.joint_module.graph.nodes if rule(n)}
    doc = redevice(captured.export())
    for nd in doc["nodes"]:
        if nd["name"] in marked:
            nd.setdefault("meta", {})["should_offload"] = True
    return doc


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "offload"))
    p.add_argument("--only", default="", help="comma-separated case names")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    os.makedirs(args.out, exist_ok=True)
    wanted = {s for s in args.only.split(",") if s}
    for name in CASES:
        if wanted and name not in wanted:
            continue
        doc = build(name)
        path = os.path.join(args.out, f"{name}.json")
        data = orjson.dumps(doc)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data + b"\n")
        os.replace(tmp, path)
        print(f"{path}: {len(doc['nodes'])} nodes, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
