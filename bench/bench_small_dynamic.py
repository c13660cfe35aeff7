"""remat vs torch on small dynamic-shape graphs, where fixed costs decide.

Contract: compiles small models with torch.compile(dynamic=True) (graph
breaks cut them into graphs of a few to a few dozen nodes, as MoE routers and
T5's relative-position buckets do in real models), records every joint graph
with the context AOTAutograd partitions it in, and times, in one run and
interleaved: torch's partitioner, remat's drop-in, remat's drop-in with
its process-wide caches emptied before each call (what every call paid
before they existed: op facts, printed symbolic expressions, the engine's
release table), and remat's drop-in importing its result through the
public, checked import_result (what every call paid before the drop-in's
own round trip left out the document checks). Each is the fastest of --repeat runs, inside
_use_lazy_graph_module(True) as dynamo partitions (module code generated on
first use, so the partition itself is what is timed). Prints the times and
the ratios torch/remat; never asserts a time.

    python bench/bench_small_dynamic.py                  # default_partition
    python bench/bench_small_dynamic.py --min-cut
    python bench/bench_small_dynamic.py --transformers   # also tiny qwen2_moe / T5
                                                         # (random weights; needs transformers)
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import warnings
from typing import Any, Callable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition
from torch.fx._lazy_graph_module import _use_lazy_graph_module

import remat.torch as rt
from remat.torch import _dropin, _fx_to_json, _release


class Buckets(nn.Module):
    """T5-style: relative-position buckets of a symbolic length, a bias, a
    graph break, then a small attention."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.bias = nn.Embedding(8, heads)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        pos = torch.arange(n)
        rel = (pos[None, :] - pos[:, None]).abs().float()
        bucket = (torch.log(rel + 1) / 2).clamp(max=7).long()
        bias = self.bias(bucket).permute(2, 0, 1)
        torch._dynamo.graph_break()
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        b, s, d = q.shape
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2) + bias).softmax(-1)
        return (att @ v).transpose(1, 2).reshape(b, s, d)


class Router(nn.Module):
    """MoE-style: a top-k router, a graph break, dense expert mixing."""

    def __init__(self, dim: int = 16, experts: int = 4) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.gate(x).softmax(-1).topk(2, dim=-1)
        mask = F.one_hot(chosen, len(self.experts)).float() * weights[..., None]
        torch._dynamo.graph_break()
        out = sum(e(x) * mask[..., i].sum(-1, keepdim=True) for i, e in enumerate(self.experts))
        return F.gelu(out)


def _tiny_transformers() -> Iterator[tuple[str, nn.Module, dict]]:
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM, T5Config, T5ForConditionalGeneration

    ids = torch.randint(0, 128, (2, 12))
    yield "qwen2_moe", Qwen2MoeForCausalLM(Qwen2MoeConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64)), \
        {"input_ids": ids, "labels": ids}
    yield "t5", T5ForConditionalGeneration(T5Config(
        vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, decoder_start_token_id=0, pad_token_id=0)), {"input_ids": ids, "labels": ids}


def _models(with_transformers: bool) -> Iterator[tuple[str, nn.Module, dict]]:
    yield "buckets", Buckets(), {"x": torch.randn(2, 6, 16)}
    yield "router", Router(), {"x": torch.randn(2, 6, 16)}
    if with_transformers:
        yield from _tiny_transformers()


def _loss(out: Any) -> torch.Tensor:
    out = getattr(out, "loss", None) if getattr(out, "loss", None) is not None else out
    return out if out.dim() == 0 else out.float().sum()


def capture(with_transformers: bool) -> list[tuple]:
    """Every joint graph of the models: (model name, joint module, joint
    inputs, partition keyword arguments, tracing context, fake mode)."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    joints: list[tuple] = []

    def recorder(name: str) -> Callable:
        def partition(joint, inputs, **kwargs):
            joints.append((name, _clone(joint), inputs, kwargs, torch._guards.TracingContext.try_get(),
                           torch._guards.detect_fake_mode(inputs)))
            return default_partition(joint, inputs, **kwargs)
        return partition

    for name, model, kwargs in _models(with_transformers):
        torch._dynamo.reset()
        backend = aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward),
                               bw_compiler=lambda g, _: make_boxed_func(g.forward),
                               partition_fn=recorder(name), keep_inference_input_mutations=True)
        _loss(torch.compile(model, backend=backend, dynamic=True)(**kwargs)).backward()
    torch._dynamo.reset()
    return joints


def _clone(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy whose node meta dicts are new and whose values are shared
    (fake tensors stay in their mode), as AOTAutograd's graphs are."""
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        new = copy.deepcopy(gm)
    for old, fresh in zip(gm.graph.nodes, new.graph.nodes):
        fresh.meta = dict(old.meta)
    return new


def _empty_caches() -> None:
    _fx_to_json._TARGETS.clear()
    _fx_to_json._EXPRS.clear()
    _fx_to_json._RAW_NAMES.clear()
    _fx_to_json._SYMBOL_TEXT.clear()
    _release._table.cache_clear()
    _release._native.cache_clear()


def _checked_import(result: dict, joint_gm: torch.fx.GraphModule, handles: list) -> tuple:
    return rt.import_result(result, joint_gm, handles)


def _with_checked_import(fn: Callable) -> Callable:
    """`fn` with the drop-in importing through the public import_result,
    which runs the document checks."""
    def run(*args, **kwargs):
        own = _dropin.import_own_result
        _dropin.import_own_result = _checked_import
        try:
            return fn(*args, **kwargs)
        finally:
            _dropin.import_own_result = own
    return run


def _time(fn: Callable, joint: tuple, before: Callable[[], None] = lambda: None) -> float:
    _, gm, inputs, kwargs, ctx, mode = joint
    fresh = _clone(gm)
    before()
    with torch._guards.tracing(ctx), mode, torch.no_grad(), _use_lazy_graph_module(True):
        start = time.perf_counter()
        fn(fresh, inputs, **kwargs)
        return time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-cut", action="store_true", help="min-cut instead of default_partition")
    parser.add_argument("--transformers", action="store_true", help="also tiny qwen2_moe and T5")
    parser.add_argument("--repeat", type=int, default=100)
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    ours, theirs = ((rt.min_cut_rematerialization_partition, min_cut_rematerialization_partition)
                    if args.min_cut else (rt.default_partition, default_partition))
    joints = capture(args.transformers)
    print(f"torch {torch.__version__}, {'min-cut' if args.min_cut else 'default_partition'}, "
          f"fastest of {args.repeat}, lazy graph modules")
    print(f"{'graph':<14}{'nodes':>6}{'torch ms':>10}{'remat ms':>10}{'ratio':>7}"
          f"{'remat, caches emptied ms':>26}{'ratio':>7}{'remat, checked import ms':>26}{'ratio':>7}")
    checked = _with_checked_import(ours)
    for i, joint in enumerate(joints):
        best = {"torch": float("inf"), "remat": float("inf"), "cold": float("inf"),
                "checked": float("inf")}
        for _ in range(args.repeat):  # interleaved: the machine's load falls on all four
            best["torch"] = min(best["torch"], _time(theirs, joint))
            best["remat"] = min(best["remat"], _time(ours, joint))
            best["cold"] = min(best["cold"], _time(ours, joint, _empty_caches))
            best["checked"] = min(best["checked"], _time(checked, joint))
        t, r, c, k = (best[x] * 1e3 for x in ("torch", "remat", "cold", "checked"))
        print(f"{joint[0] + f'[{i}]':<14}{len(joint[1].graph.nodes):>6}{t:>10.3f}{r:>10.3f}{t / r:>7.2f}"
              f"{c:>26.3f}{t / c:>7.2f}{k:>26.3f}{t / k:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
