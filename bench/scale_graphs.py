"""The scale benchmark's inputs: real joint graphs of ~2k, ~10k and ~50k nodes.

Contract: `python bench/scale_graphs.py --write` captures, under the running
torch (made with torch 2.15.0, /work/main/.venv), the joint graph inductor
hands its partitioner for each deep stack below and stores it gzipped as
bench/graphs/<family>_<nodes>.json.gz (<nodes>: the graph's node count; a
remat.joint_graph v1 file, as `remat.torch.capture()` saves it). Without
--write it captures and prints each graph's node count and gzipped size and
whether it equals the stored file, and writes nothing. bench/bench_scale.py
reads the stored files.

How they are made (enough to make them again):

* Each family is a corpus block (tests/python/corpus/models.py) stacked N
  deep in an nn.Sequential, built after torch.manual_seed(0); its input is
  drawn by the corpus's seeded `_randn` and needs a gradient:

    transformer  TransformerBlock(64)                  x (2, 128, 64)
    unet         UNet(channels=8, depth=3)             x (4, 8, 32, 32)
    moe          MoEBlock(64, experts=4, top_k=2,      x (2, 128, 64)
                          hidden=128)
    resnet       BasicResBlock()                       x (8, 4, 32, 32)

  N per graph is in GRAPHS below.
* The capture is `with remat.torch.capture() as cap:
  torch.compile(model, dynamic=False, backend=B)(x).sum().backward()` with
  torch's AOTAutograd and inductor FX caches off (a cache hit would skip the
  partitioner, and nothing would be captured), where B is inductor's own
  compile_fx with an inner compiler that stops at the first call. Inductor
  partitions the joint graph before it generates any code, so the capture is
  complete by then; stopping there skips minutes of C++ code generation per
  graph and gives the same file as the plain inductor backend (checked byte
  for byte on a 2-block transformer stack).
* gzip with mtime 0, so the same graph gives the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import io
import json
import os
import sys
import time
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRAPH_DIR = os.path.join(HERE, "graphs")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import torch  # noqa: E402
import torch._functorch.config as functorch_config  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402
from torch import nn  # noqa: E402
from torch._inductor.compile_fx import compile_fx  # noqa: E402

import remat  # noqa: E402
import remat.torch as rt  # noqa: E402
from corpus import models  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Family:
    block: Callable[[], nn.Module]
    input_shape: tuple[int, ...]


FAMILIES = {
    "transformer": Family(lambda: models.TransformerBlock(64), (2, 128, 64)),
    "unet": Family(lambda: models.UNet(channels=8, depth=3), (4, 8, 32, 32)),
    "moe": Family(lambda: models.MoEBlock(64, experts=4, top_k=2, hidden=128), (2, 128, 64)),
    "resnet": Family(models.BasicResBlock, (8, 4, 32, 32)),
}

# (family, blocks): about 2k, 10k and 50k joint nodes each.
GRAPHS = [
    ("transformer", 12), ("transformer", 60), ("transformer", 300),
    ("unet", 4), ("unet", 17), ("unet", 85),
    ("moe", 6), ("moe", 31), ("moe", 155),
    ("resnet", 14), ("resnet", 70), ("resnet", 350),
]


class _Partitioned(Exception):
    """Raised by the inner compiler: the partitioner has run, the capture is done."""


def _stop(*args, **kwargs):
    raise _Partitioned()


def capture(family: str, blocks: int) -> bytes:
    """The joint graph of `blocks` stacked blocks of `family`, as JSON bytes."""
    spec = FAMILIES[family]
    torch.manual_seed(0)
    model = nn.Sequential(*(spec.block() for _ in range(blocks)))
    x = models._randn(*spec.input_shape, requires_grad=True)
    torch._dynamo.reset()
    backend = functools.partial(compile_fx, inner_compile=_stop)
    with functorch_config.patch(enable_autograd_cache=False), \
            inductor_config.patch(fx_graph_cache=False), rt.capture() as cap:
        try:
            torch.compile(model, dynamic=False, backend=backend)(x).sum().backward()
        except Exception as e:  # dynamo wraps _Partitioned in BackendCompilerFailed
            if not isinstance(getattr(e, "inner_exception", e), _Partitioned):
                raise
    if len(cap.captured) != 1:
        raise RuntimeError(f"{family} x{blocks}: {len(cap.captured)} joint graphs captured, expected 1")
    return cap.captured[0].export(as_json=True) + b"\n"


def gzipped(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(data)
    return buf.getvalue()


def node_count(data: bytes) -> int:
    return len(json.loads(data)["nodes"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="store the graphs under bench/graphs/")
    ap.add_argument("--only", action="append", choices=sorted(FAMILIES), help="these families only")
    ap.add_argument("--min-blocks", type=int, default=0, help="skip stacks shallower than this")
    ap.add_argument("--max-blocks", type=int, default=None, help="skip stacks deeper than this")
    args = ap.parse_args(argv)
    total = 0
    for family, blocks in GRAPHS:
        if (args.only and family not in args.only) or blocks < args.min_blocks or \
                (args.max_blocks and blocks > args.max_blocks):
            continue
        t = time.perf_counter()
        data = capture(family, blocks)
        packed = gzipped(data)
        path = os.path.join(GRAPH_DIR, f"{family}_{node_count(data)}.json.gz")
        same = os.path.exists(path) and open(path, "rb").read() == packed
        total += len(packed)
        print(f"{os.path.relpath(path, ROOT)}: {blocks} blocks, {len(packed) / 1024:.0f} KiB gzipped, "
              f"captured in {time.perf_counter() - t:.0f} s, {'same as stored' if same else 'differs or new'}",
              flush=True)
        if args.write:
            os.makedirs(GRAPH_DIR, exist_ok=True)
            remat.write_file(path, packed)
    print(f"total {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
