#!/usr/bin/env python3
"""Captures real joint graphs from torch and writes them to examples/*.json.

Each example is a small model compiled with torch.compile and an aot_autograd
backend whose partition function is torch's min-cut partitioner; the joint graph
torch hands that partitioner is recorded by `remat.torch.capture()` and
exported in format v1. Re-running rewrites the files byte for byte the same
for the same torch version.

  python tools/capture_examples.py [--out examples] [--only mlp,cnn_batchnorm]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import orjson  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: E402

import remat.torch as rt  # noqa: E402


class MLP(nn.Module):
    def __init__(self, d: int = 16, h: int = 64) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


class Checkpointed(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.c = nn.Linear(d, d)

    def block(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.b(torch.relu(self.a(x)))) * x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
        return self.c(y).tanh()


def _nop(gm: torch.fx.GraphModule, _inputs) -> torch.fx.GraphModule:
    return gm


def capture_one(model: nn.Module, inputs: list, *, dynamic: bool = False) -> rt.CapturedJoint:
    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=_nop, bw_compiler=_nop,
                           partition_fn=min_cut_rematerialization_partition)
    compiled = torch.compile(model, backend=backend, dynamic=dynamic, fullgraph=True)
    with rt.capture() as session:
        out = compiled(*inputs)
        out.sum().backward()
    if len(session.captured) != 1:
        raise RuntimeError(f"expected one joint graph, captured {len(session.captured)}")
    return session.captured[0]


def examples() -> dict:
    torch.manual_seed(0)
    return {
        "mlp": lambda: capture_one(MLP(), [torch.randn(8, 16)]),
        "transformer_block": lambda: capture_one(TransformerBlock(), [torch.randn(2, 8, 32)]),
        "cnn_batchnorm": lambda: capture_one(CNN(), [torch.randn(2, 3, 8, 8)]),
        "checkpointed": lambda: capture_one(Checkpointed(), [torch.randn(4, 16, requires_grad=True)]),
        "mlp_dynamic": lambda: capture_one(MLP(), [torch.randn(8, 16)], dynamic=True),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "examples"))
    p.add_argument("--only", default="", help="comma-separated example names")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    os.makedirs(args.out, exist_ok=True)
    wanted = {s for s in args.only.split(",") if s}
    for name, make in examples().items():
        if wanted and name not in wanted:
            continue
        captured = make()
        path = os.path.join(args.out, f"{name}.json")
        # Indented: examples are read and diffed by people too.
        data = orjson.dumps(captured.export(), option=orjson.OPT_INDENT_2)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data + b"\n")
        os.replace(tmp, path)
        n = len(captured.joint_module.graph.nodes)
        print(f"{path}: {n} nodes, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
