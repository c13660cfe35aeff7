"""Parity of the budget group's torch-release switches with the running torch.

Contract: each test_<switch> builds a joint graph that exercises one switch
of remat/torch_release.h (hand-written with make_fx, on fake CUDA tensors
where the op is a CUDA kernel, or captured live through aot_function), runs
the running release's own partitioner and remat's drop-in on copies of it,
and requires the same saved values and graphs, or, where torch raises, the
same exception type and text (remat's is also a RematError). Where the other
side of the switch answers differently on that graph, it also shows that
remat with the switch flipped (options "torch_switches") answers differently,
so the test fails if the switch breaks, under every release. The switches
that no partition can show (a FLOP formula only remat's own reports read, a
diagnosis edge solve_min_cut never builds) are compared where torch computes
them: FlopCounterMode's formulas against the engine's (remat_knapsack_probe),
the diagnosis text of a failed cut.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

import torch._functorch.config as functorch_config  # noqa: E402
from functorch.compile import aot_function, make_boxed_func  # noqa: E402
from torch._functorch import partitioners as tp  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy  # noqa: E402

import parity  # noqa: E402
import remat  # noqa: E402
from corpus.capture import copy_graph_module  # noqa: E402
from remat.torch import _release  # noqa: E402
from remat.torch._fx_to_json import export_joint_graph  # noqa: E402

aten = torch.ops.aten
REPO = Path(__file__).resolve().parents[2]
RUNNING = _release.reproduced()
REGION_KEY = "_region_activation_memory_budget"
COVERAGE_FLAG = "activation_memory_budget_require_full_coverage"


# --- running both partitioners ----------------------------------------------------

class Outcome:
    """A partition's answer: the (forward, backward) modules, or the exception."""

    def __init__(self, result: Optional[tuple] = None, error: Optional[BaseException] = None,
                 num_fwd_outputs: int = 1):
        self.result, self.error, self.n = result, error, num_fwd_outputs

    def key(self) -> tuple:
        """What two answers are compared by: the saved values, or the error."""
        if self.error is not None:
            return ("raised", type(self.error).__name__, str(self.error))
        return ("saved", tuple(parity.saved_value_names(self.result[0], self.n)))

    def __repr__(self) -> str:
        return repr(self.key())


def _run(joint: torch.fx.GraphModule, n: int, fn: Optional[Callable] = None,
         options: Optional[dict] = None) -> Outcome:
    """Partitions a copy of `joint` with torch's `fn`, or with remat's drop-in
    under `options` (remat.torch.partition) when given."""
    gm = copy_graph_module(joint)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if options is not None:
                p = rt.partition(gm, num_fwd_outputs=n, options=options)
                return Outcome((p.forward, p.backward), num_fwd_outputs=n)
            return Outcome(fn(gm, None, num_fwd_outputs=n), num_fwd_outputs=n)
    except Exception as e:  # noqa: BLE001  (the error is the answer)
        return Outcome(error=e, num_fwd_outputs=n)


def _config(**config: Any):
    """torch._functorch.config patched with the flags this torch has."""
    return functorch_config.patch({k: v for k, v in config.items() if hasattr(functorch_config, k)})


def _assert_same_error(theirs: BaseException, ours: BaseException, label: str) -> None:
    assert isinstance(ours, remat.RematError), f"{label}: remat raised {ours!r}"
    assert isinstance(ours, type(theirs)), f"{label}: torch raised {theirs!r}, remat {ours!r}"
    if type(theirs) is not RuntimeError:  # a builtin of torch's formula: same name, same text
        assert type(ours).__name__ == type(theirs).__name__, (theirs, ours)
        assert str(ours) == str(theirs), f"{label}:\n torch: {theirs}\n remat: {ours}"
    elif isinstance(ours, remat.NoFiniteCutError):  # the files it names are remat's own
        assert _conflict_section(str(ours)) == _conflict_section(str(theirs)), (theirs, ours)
    else:
        assert str(theirs) in str(ours), f"{label}:\n torch: {theirs}\n remat: {ours}"


def assert_parity(joint: torch.fx.GraphModule, n: int, label: str, **config: Any) -> Outcome:
    """torch's min-cut and remat's drop-in give the same answer; returns remat's."""
    with _config(**config):
        theirs = _run(joint, n, tp.min_cut_rematerialization_partition)
        ours = _run(joint, n, rt.min_cut_rematerialization_partition)
    if theirs.error is not None:
        assert ours.error is not None, f"{label}: torch raised {theirs.error!r}, remat partitioned"
        _assert_same_error(theirs.error, ours.error, label)
        return ours
    assert ours.error is None, f"{label}: torch partitioned, remat raised {ours.error!r}"
    parity.assert_same_partition(theirs.result, ours.result, n, label)
    return ours


def with_switches(joint: torch.fx.GraphModule, n: int, switches: dict, **config: Any) -> Outcome:
    """remat's answer under the running release with some switches set."""
    with _config(**config):
        options = {**rt.options_from_torch(), "torch_switches": switches}
        return _run(joint, n, options=options)


def flipped(joint: torch.fx.GraphModule, n: int, switch: str, **config: Any) -> Outcome:
    """remat's answer with one switch set the other way from the running release."""
    return with_switches(joint, n, {switch: not _release.behaves(switch)}, **config)


def assert_switch_matters(joint: torch.fx.GraphModule, n: int, switch: str, ours: Outcome,
                          **config: Any) -> None:
    other = flipped(joint, n, switch, **config)
    assert other.key() != ours.key(), f"{switch}: flipping it changes nothing on this graph: {ours}"


# --- building joint graphs ----------------------------------------------------------

def hand_joint(joint_fn: Callable, primals: list, tangents: list) -> torch.fx.GraphModule:
    """A hand-written joint graph (primals_N / tangents_N placeholders), traced
    with fake tensors; CUDA inputs are fake ones made beforehand."""
    return make_fx(joint_fn, tracing_mode="fake")(primals, tangents)


def fake_cuda(*shapes, dtype=torch.float16) -> list:
    """Fake CUDA tensors of one fake mode: the attention kernels the formulas
    count are CUDA ones, and their fake implementations run anywhere."""
    with FakeTensorMode():
        return [torch.empty(*s, device="cuda", dtype=dtype) for s in shapes]


def captured(fn: Callable, args: list, joint_hook: Optional[Callable] = None):
    """The joint graph aot_function hands its partition function for fn(*args)
    (after `joint_hook` edits it), and its num_fwd_outputs."""
    box: dict = {}

    def partition_fn(joint, joint_inputs, **kwargs):
        if joint_hook is not None:
            joint_hook(joint)
        box["joint"], box["n"] = copy_graph_module(joint), kwargs["num_fwd_outputs"]
        return tp.default_partition(joint, joint_inputs, **kwargs)

    def nop(gm, _):
        return make_boxed_func(gm.forward)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aot_function(fn, fw_compiler=nop, bw_compiler=nop, partition_fn=partition_fn)(*args)
    return box["joint"], box["n"]


def _node(joint: torch.fx.GraphModule, name: str) -> torch.fx.Node:
    return next(n for n in joint.graph.nodes if n.name == name)


# --- the engine's own FLOP formulas (remat_knapsack_probe) ---------------------------

def _probe_path() -> Optional[Path]:
    for d in filter(None, (os.environ.get("REMAT_BUILD_DIR"), str(REPO / "build"))):
        p = Path(d) / "remat_knapsack_probe"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def probe_flops(line: str, switch: str) -> tuple[str, str]:
    """remat's answer for an op line (tests/probe/op_graph.h) under the
    running release, and with `switch` flipped: "ok N" or "err torch TYPE TEXT"."""
    path = _probe_path()
    assert path is not None, "remat_knapsack_probe is needed: set REMAT_BUILD_DIR to the build"
    requests = [f"release {RUNNING}", f"flops {line}",
                f"switch {switch} {int(not _release.behaves(switch))}", f"flops {line}"]
    out = subprocess.run([str(path)], input="\n".join(requests) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "ok" and out[2] == "ok", out
    return out[1], out[3]


def assert_flops_parity(torch_count: Callable[[], int], line: str, switch: str) -> None:
    """torch's FLOP count (or its exception) against the probe's, and the
    switch flipped answers otherwise."""
    try:
        want, theirs = f"ok {torch_count()}", None
    except (AssertionError, TypeError) as e:
        want, theirs = None, e
    ours, other = probe_flops(line, switch)
    if theirs is None:
        assert float(ours[3:]) == float(want[3:]), (line, ours, want)
    else:
        prefix = f"err torch {type(theirs).__name__} "
        assert ours.startswith(prefix), (line, ours, theirs)
        # remat's text is torch's (for a HOP, up to where torch names its mode stack).
        assert str(theirs).startswith(ours[len(prefix):]), (ours, str(theirs))
    assert other != ours, f"{switch}: flipping it changes nothing for {line}: {ours}"


# === op categories =====================================================================

def _leaky_relu_joint():
    def joint(primals, tangents):
        x, w = primals
        (t,) = tangents
        mm = aten.mm.default(x, w)
        lr = aten.leaky_relu.default(mm, 0.01)
        g = aten.mul.Tensor(t, aten.cos.default(lr))
        glr = aten.leaky_relu_backward.default(g, mm, 0.01, False)
        return [aten.sin.default(lr), aten.mm.default(glr, aten.t.default(w)),
                aten.mm.default(aten.t.default(x), glr)]

    return hand_joint(joint, [torch.randn(8, 16), torch.randn(16, 32)], [torch.randn(8, 32)]), 1


def _doc_saved(doc: dict, switch: str, on: bool) -> list:
    options = {**rt.options_from_torch(), "torch_switches": {switch: on}}
    return remat.partition(doc, options, as_json=False)["saved_values"]


def test_leaky_relu_family_pointwise():
    """2.12 tagged leaky_relu pointwise (recomputable, fusible); 2.11 saves it.
    The tags a graph records are its torch's: a graph captured under 2.12 on
    says pointwise, which 2.11 must not believe."""
    switch = "leaky_relu_family_pointwise"
    joint, n = _leaky_relu_joint()
    ours = assert_parity(joint, n, switch)
    doc = export_joint_graph(copy_graph_module(joint), n)
    for op in doc["ops"]:
        if op.get("packet") == "aten.leaky_relu":
            for key in ("tags", "packet_tags"):
                op[key] = sorted(set(op[key]) | {"pointwise"})
    answers = {on: _doc_saved(doc, switch, on) for on in (False, True)}
    assert answers[False] != answers[True], answers
    assert tuple(answers[_release.behaves(switch)]) == ours.key()[1]


def test_prepare_softmax_online_recomputable():
    """2.13 lists prims.prepare_softmax_online as recomputable; 2.12 saves its outputs."""
    switch = "prepare_softmax_online_recomputable"
    import torch._inductor.inductor_prims  # noqa: F401  (registers the prim)

    def joint(primals, tangents):
        (x,) = primals
        (t,) = tangents
        m, s = torch.ops.prims.prepare_softmax_online.default(x, 1)
        e = aten.exp.default(aten.sub.Tensor(x, m))
        g = aten.div.Tensor(aten.mul.Tensor(aten.unsqueeze.default(t, 1), e), s)
        return [aten.sum.dim_IntList(aten.div.Tensor(e, s), [1]), g]

    gm = hand_joint(joint, [torch.randn(4, 8)], [torch.randn(4)])
    ours = assert_parity(gm, 1, switch)
    assert ours.error is None
    assert_switch_matters(gm, 1, switch, ours)


# === FLOP formulas (the memory budget's knapsack runtimes) ==============================

def _gqa_joint():
    """Grouped-query efficient attention (8 query heads, 2 key/value heads),
    its output read by the backward: the attention node is the knapsack's
    only item under a budget, so its FLOPs are counted."""
    *primals, t = fake_cuda((2, 8, 128, 16), (2, 2, 128, 16), (2, 2, 128, 64), (2, 8, 128, 64))

    def joint(primals, tangents):
        q, k, v = primals
        (t,) = tangents
        out = aten._scaled_dot_product_efficient_attention.default(q, k, v, None, False)[0]
        return [aten.sin.default(out), aten.mul.Tensor(t, aten.cos.default(out)), None, None]

    return hand_joint(joint, primals, [t]), 1


def test_sdpa_flops_gqa():
    """2.11's SDPA formula asserts equal head counts: a grouped-query attention
    node fails the memory-budget partition with its AssertionError; 2.12 counts it."""
    switch = "sdpa_flops_gqa"
    joint, n = _gqa_joint()
    ours = assert_parity(joint, n, switch, activation_memory_budget=0.5)
    if not _release.behaves(switch):
        assert isinstance(ours.error, AssertionError), ours
    assert_switch_matters(joint, n, switch, ours, activation_memory_budget=0.5)


def _two_items_joint(attention: Callable, shapes: dict, device_tensors: Callable):
    """An attention node and an mm, both banned in the fully aggressive tier
    and both read by the backward, on inputs broadcast from tiny primals (so
    the activations outweigh the inputs): at budget 0.8 the knapsack keeps
    one of them, the one whose FLOPs are the higher."""
    q0, k0, v0, x0, w0, t1, t2 = device_tensors(
        *(shapes[k] for k in ("q0", "k0", "v0", "x0", "w0", "out", "mm")))

    def joint(primals, tangents):
        q0, k0, v0, x0, w0 = primals
        t1, t2 = tangents
        q = aten.expand.default(q0, shapes["q"])
        k = aten.expand.default(k0, shapes["k"])
        v = aten.expand.default(v0, shapes["k"])
        out = attention(q, k, v)
        mm = aten.mm.default(aten.expand.default(x0, shapes["x"]),
                             aten.expand.default(w0, shapes["w"]))
        g1 = aten.mul.Tensor(t1, aten.cos.default(out))
        g2 = aten.mul.Tensor(t2, aten.cos.default(mm))
        return [aten.sin.default(out), aten.sin.default(mm), g1, None, None, g2, None]

    return hand_joint(joint, [q0, k0, v0, x0, w0], [t1, t2]), 2


def test_flops_flash_attention_bshd():
    """2.14 reads the raw flash kernel's (batch, seq, heads, dim) inputs as
    such; 2.13 read them as (batch, heads, seq, dim), 32 times fewer FLOPs
    here: the knapsack recomputes the attention instead of the mm."""
    switch = "flops_flash_attention_bshd"

    def attention(q, k, v):
        return aten._flash_attention_forward.default(q, k, v, None, None, 128, 128, 0.0, False,
                                                     False)[0]

    shapes = {"q0": (1, 1, 1, 64), "k0": (1, 1, 1, 64), "v0": (1, 1, 1, 64), "q": [2, 128, 4, 64],
              "k": [2, 128, 4, 64], "out": (2, 128, 4, 64), "x0": (1, 256), "w0": (1, 256),
              "x": [128, 256], "w": [256, 256], "mm": (128, 256)}
    joint, n = _two_items_joint(attention, shapes, fake_cuda)
    ours = assert_parity(joint, n, switch, activation_memory_budget=0.8)
    assert ours.error is None
    assert_switch_matters(joint, n, switch, ours, activation_memory_budget=0.8)


def test_flops_sdpa_for_cpu():
    """2.15 counts the CPU flash kernel with the SDPA formula (before: 0, so
    runtime 1): the knapsack keeps the attention and recomputes the mm."""
    switch = "flops_sdpa_for_cpu"

    def attention(q, k, v):
        return aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v)[0]

    # Short queries against long keys: the attention is banned in every tier
    # as a reduction (its output is under a quarter of its inputs).
    shapes = {"q0": (1, 1, 4, 8), "k0": (1, 1, 1, 8), "v0": (1, 1, 1, 8), "q": [2, 4, 4, 8],
              "k": [2, 4, 64, 8], "out": (2, 4, 4, 8), "x0": (1, 16), "w0": (1, 64),
              "x": [4, 16], "w": [16, 64], "mm": (4, 64)}
    joint, n = _two_items_joint(attention, shapes,
                                lambda *s: [torch.randn(*x) for x in s])
    ours = assert_parity(joint, n, switch, activation_memory_budget=0.8)
    assert ours.error is None
    assert_switch_matters(joint, n, switch, ours, activation_memory_budget=0.8)


def test_flops_mm_family_extra_args():
    """Before 2.14, the formulas of addmm / bmm / baddbmm take an extra
    positional argument (a .dtype overload's out_dtype) for out_shape: the
    knapsack's runtime estimate of such a node is a TypeError, and so is the
    partition; 2.14 counts it."""
    switch = "flops_mm_family_extra_args"

    def joint(primals, tangents):
        a0, b0 = primals
        (t,) = tangents
        out = aten.bmm.dtype(aten.expand.default(a0, [8, 64, 64]),
                             aten.expand.default(b0, [8, 64, 64]), torch.float32)
        return [aten.sin.default(out), aten.mul.Tensor(t, aten.cos.default(out)), None]

    gm = hand_joint(joint, [torch.randn(1, 64, 64, dtype=torch.bfloat16) for _ in range(2)],
                    [torch.randn(8, 64, 64)])
    ours = assert_parity(gm, 1, switch, activation_memory_budget=0.5)
    if not _release.behaves(switch):
        assert isinstance(ours.error, TypeError), ours
    assert_switch_matters(gm, 1, switch, ours, activation_memory_budget=0.5)


def _flex_flops() -> int:
    from torch.nn.attention.flex_attention import create_block_mask
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = (torch.randn(1, 2, 128, 8) for _ in range(3))
    block_mask = create_block_mask(lambda b, h, qi, ki: qi >= 0, 1, 2, 128, 128, device="cpu")

    def score_mod(score, b, h, qi, ki):
        return score

    with FlopCounterMode(display=False) as mode:
        torch.ops.higher_order.flex_attention(q, k, v, score_mod, block_mask.as_tuple(), 0.35,
                                              {}, (), ())
    return mode.get_total_flops()


def _mm_item_with_attr_argument():
    """An mm the knapsack prices, one of whose arguments is a get_attr node
    without "val" metadata, as a flex_attention node's score_mod is."""
    def joint(primals, tangents):
        x0, w0 = primals
        (t,) = tangents
        mm = aten.mm.default(aten.expand.default(x0, [64, 64]), aten.expand.default(w0, [64, 64]))
        return [aten.sin.default(mm), aten.mul.Tensor(t, aten.cos.default(mm)), None]

    gm = hand_joint(joint, [torch.randn(1, 64), torch.randn(1, 64)], [torch.randn(64, 64)])
    gm.score_mod = torch.nn.Module()
    mm = _node(gm, "mm")
    with gm.graph.inserting_before(mm):
        attr = gm.graph.get_attr("score_mod")
    mm.kwargs = {**mm.kwargs, "score_mod": attr}
    gm.recompile()
    return gm, 1


def test_flops_registered_hops():
    """2.15's FlopCounterMode counts a HOP with a registered formula
    (flex_attention: the SDPA counts); before, running one under it is a
    TypeError. No partition shows it: estimate_runtime first reads
    meta["val"] of every argument, and a flex_attention node's score_mod is a
    get_attr without one, a KeyError in every release (pinned on an mm
    carrying such an argument)."""
    switch = "flops_registered_hops"
    assert_flops_parity(
        _flex_flops, "higher_order.flex_attention t:1x2x128x8 t:1x2x128x8 t:1x2x128x8 n n f:0.35",
        switch)
    joint, n = _mm_item_with_attr_argument()
    ours = assert_parity(joint, n, "an argument without val", activation_memory_budget=0.5)
    assert isinstance(ours.error, KeyError) and str(ours.error) == "'val'", ours


def _registered_formula(op, *args):
    from torch.utils.flop_counter import flop_registry

    meta = [torch.empty(a, device="meta") if isinstance(a, tuple) else a for a in args]
    return lambda: flop_registry[op._overloadpacket](*meta, out_val=None)


@pytest.mark.parametrize("kernel", ["flash", "efficient"])
def test_flops_nested_attention_dv(kernel):
    """2.15: a jagged backward attention's grad_out has the value's head size;
    before, it must have the query's shape (an AssertionError otherwise). The
    partitioner prices forward nodes only, so this reaches remat's own
    runtime reports; compared with torch's registered formula directly."""
    switch = "flops_nested_attention_dv"
    if kernel == "flash":
        # grad_out (100, 4, 16), q/k (total, 4, 8), v (120, 4, 16), 4 sequences.
        count = _registered_formula(
            aten._flash_attention_backward.default, (100, 4, 16), (100, 4, 8), (120, 4, 8),
            (120, 4, 16), (100, 4, 16), (4, 100), (5,), (5,), 30, 40, 0.0, False, (2,), (2,))
        line = ("aten._flash_attention_backward.default t:100x4x16 t:100x4x8 t:120x4x8 "
                "t:120x4x16 t:100x4x16 t:4x100 t:5 t:5 i:30 i:40 f:0 b:0 t:2 t:2")
    else:
        count = _registered_formula(
            aten._efficient_attention_backward.default, (1, 50, 4, 16), (1, 50, 4, 8),
            (1, 60, 4, 8), (1, 60, 4, 16), None, (1, 50, 4, 16), (4,), (4,), 20, 25,
            (1, 4, 50), 0.0, (2,), (2,), 0, False)
        line = ("aten._efficient_attention_backward.default t:1x50x4x16 t:1x50x4x8 t:1x60x4x8 "
                "t:1x60x4x16 n t:1x50x4x16 t:4 t:4 i:20 i:25 t:1x4x50 f:0 t:2 t:2 i:0 b:0")
    assert_flops_parity(count, line, switch)


# === the graph's memory budget ==========================================================

def _mlp_joint(annotate: Callable[[torch.fx.GraphModule], None]):
    def f(x, w1, w2):
        return ((x @ w1).relu() @ w2).sin().sum()

    args = [torch.randn(8, 16, requires_grad=True), torch.randn(16, 32, requires_grad=True),
            torch.randn(32, 16, requires_grad=True)]
    return captured(f, args, joint_hook=annotate)


def _annotate(budgets: Callable[[int, torch.fx.Node], Optional[float]]):
    def hook(joint):
        for i, node in enumerate(joint.graph.nodes):
            b = budgets(i, node)
            if b is not None:
                node.meta.setdefault("custom", {})[REGION_KEY] = b
    return hook


def _first_mm_only(i: int, node: torch.fx.Node) -> Optional[float]:
    return 0.0 if node.name == "mm" else None


REGION_CASES = {
    "every_node_at_0": lambda i, node: 0.0,
    "conflicting": lambda i, node: 0.0 if i % 2 else 0.5,
}


@pytest.mark.parametrize("case", sorted(REGION_CASES))
def test_region_memory_budget(case):
    """2.13 reads region_activation_memory_budget annotations (one budget for
    the graph, agreeing, covering the forward); 2.12 ignores them."""
    switch = "region_memory_budget"
    joint, n = _mlp_joint(_annotate(REGION_CASES[case]))
    ours = assert_parity(joint, n, f"{switch}[{case}]")
    assert_switch_matters(joint, n, switch, ours)


@pytest.mark.parametrize("required", [True, False], ids=["required", "waived"])
def test_region_budget_full_coverage_flag(required):
    """A region budget on part of the forward: 2.13 and 2.14 refuse it
    (their text); 2.15 refuses it with a text naming
    config.activation_memory_budget_require_full_coverage, and with the flag
    False applies it to the whole graph. Releases without the flag ignore
    remat's option of that name, as they have nothing to read."""
    switch = "region_budget_full_coverage_flag"
    joint, n = _mlp_joint(_annotate(_first_mm_only))
    config = {COVERAGE_FLAG: required}
    has_flag = hasattr(functorch_config, COVERAGE_FLAG)
    if has_flag:
        ours = assert_parity(joint, n, f"{switch}[{required}]", **config)
        with _config(**config):
            assert rt.options_from_torch()[COVERAGE_FLAG] is required
    else:
        ours = assert_parity(joint, n, switch)
        assert rt.options_from_torch()[COVERAGE_FLAG] is True  # the behavior without the flag
        options = {**rt.options_from_torch(), COVERAGE_FLAG: required}
        assert _run(joint, n, options=options).key() == ours.key()
    read = _release.behaves("region_memory_budget")
    assert ("unannotated" in str(ours.error)) is (read and (required or not _release.behaves(switch))), ours
    if read:
        assert_switch_matters(joint, n, switch, ours, **config)
    else:  # 2.12 reads no region budget: the switch shows once they are read
        answers = {on: with_switches(joint, n, {"region_memory_budget": True, switch: on}).key()
                   for on in (False, True)}
        assert answers[False] != answers[True], answers


def test_knapsack_empty_returns_aggressive():
    """Under a budget, when every banned node left for the knapsack is
    MUST_SAVE, 2.14 keeps the fully aggressive cut; 2.13 saved the inputs and
    the MUST_SAVE nodes."""
    switch = "knapsack_empty_returns_aggressive"

    def f(x, w, p):
        return (x @ w).sin().sum() + p[:, 0].exp().sum()

    def must_save_mm(joint):
        for node in joint.graph.nodes:
            if node.target is aten.mm.default and node.name == "mm":
                node.meta["recompute"] = CheckpointPolicy.MUST_SAVE
                node.meta["ac_graph_id"] = 1

    args = [torch.randn(64, 8, requires_grad=True), torch.randn(8, 64, requires_grad=True),
            torch.randn(64, 8, requires_grad=True)]
    joint, n = captured(f, args, joint_hook=must_save_mm)
    ours = assert_parity(joint, n, switch, activation_memory_budget=0.5)
    assert ours.error is None
    assert_switch_matters(joint, n, switch, ours, activation_memory_budget=0.5)


EPILOGUE_KEY = "aot_runtime_epilogue_input_mutation"


def _epilogue_joint():
    """f mutates its input x in place; x is a non-leaf that requires grad, so
    AOTAutograd replays the mutation after the forward (the runtime
    epilogue). torch 2.15 stamps the primal for it; for an older torch the
    stamp is written here, as 2.15 would, and that release must ignore it."""
    def f(x, w):
        out = torch.sin(x + 1) * w
        x.mul_(2)
        return out

    x = torch.randn(8, 8, requires_grad=True) * 1
    w = torch.randn(8, 8, requires_grad=True)
    joint, n = captured(f, [x, w])
    primal = _node(joint, "primals_1")
    stamped = [p.name for p in joint.graph.find_nodes(op="placeholder") if p.meta.get(EPILOGUE_KEY)]
    if _release.behaves("epilogue_mutation_unsaveable"):
        assert stamped == ["primals_1"], stamped  # torch stamps it itself
    else:
        assert stamped == [], stamped
        primal.meta[EPILOGUE_KEY] = True
    return joint, n


@pytest.mark.parametrize("budget", [1.0, 0.0])
def test_epilogue_mutation_unsaveable(budget):
    """2.15: an input the runtime epilogue overwrites cannot be saved (the
    backward would read the overwritten data), and budget 0 does not simply
    save the inputs; before, such an input is saved like any other."""
    switch = "epilogue_mutation_unsaveable"
    joint, n = _epilogue_joint()
    doc = export_joint_graph(copy_graph_module(joint), n)
    (exported,) = [nd for nd in doc["nodes"] if nd["name"] == "primals_1"]
    assert exported["meta"][EPILOGUE_KEY] is True
    ours = assert_parity(joint, n, f"{switch}[{budget}]", activation_memory_budget=budget)
    assert ours.error is None
    saved = ours.key()[1]
    assert ("primals_1" in saved) is not _release.behaves(switch), saved
    assert_switch_matters(joint, n, switch, ours, activation_memory_budget=budget)


# === the no-finite-cut diagnosis =========================================================

def _conflict_section(message: str) -> tuple[str, str]:
    """The diagnosis: the constraints of the nodes on the path, and the path."""
    start = message.index("Nodes involved in the conflict")
    constraints = message[start:message.index("\n\n", start)]
    path = message[message.index("[Debug: min-cut path]"):]
    return constraints, path[:path.index("\n")]


def test_infinite_path_exact_inf(tmp_path, monkeypatch):
    """2.15's diagnosis follows only math.inf edges; 2.14's also INT_INF ones
    (a SymFloat's finite weight). solve_min_cut never builds an INT_INF edge
    (a SymFloat is a sym node, weighed by its size), so both sides describe
    every failed cut alike: the diagnosis is compared with torch's here, and
    tests/cpp/test_decide.cc pins the two on a network built by hand."""
    switch = "infinite_path_exact_inf"
    monkeypatch.chdir(tmp_path)  # torch and remat dump min_cut_failed_graph*.txt here

    def joint(primals, tangents):
        x, w, b = primals
        (t,) = tangents
        y = aten.native_layer_norm.default(x, [16], w, b, 1e-5)[0]
        return [aten.sin.default(y), aten.mul.Tensor(t, aten.cos.default(y)), None, None]

    gm = hand_joint(joint, [torch.randn(4, 16), torch.randn(16), torch.randn(16)],
                    [torch.randn(4, 16)])
    # The layer norm's tuple can be neither recomputed (not in the allowlist)
    # nor saved (not a tensor), and its getitem must be recomputed.
    _node(gm, "getitem").meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
    ours = assert_parity(gm, 1, switch)  # the same conflict section, path included
    assert isinstance(ours.error, remat.NoFiniteCutError), ours
    other = flipped(gm, 1, switch)
    assert _conflict_section(str(other.error)) == _conflict_section(str(ours.error))
