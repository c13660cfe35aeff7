"""Parity of the prepare stage's release switches (DCE, CSE, forced saves) and
of FX naming, against the running torch's own partitioner.

Contract: each test builds a joint graph that exercises one switch (captured
live through aot_function, or edited by a joint hook the way a joint pass
would), partitions independent copies with the running release's
partitioner and with remat's drop-in, and requires the same saved values and
the same forward and backward graphs (or, where torch raises, the same error
text). Where the switch's two sides differ on that graph, it also requires
that remat with the switch flipped gives another answer: the test fails if
the switch breaks, under every release.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Optional

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

import torch.fx as fx  # noqa: E402
from functorch.compile import aot_function  # noqa: E402
from torch._functorch.partitioners import (  # noqa: E402
    default_partition,
    min_cut_rematerialization_partition,
)

import parity  # noqa: E402
from corpus.capture import copy_graph_module  # noqa: E402
from remat.torch import _release  # noqa: E402

aten = torch.ops.aten

_TORCH = {"min_cut": min_cut_rematerialization_partition, "default": default_partition}


class Outcome:
    """What one partitioner did with one joint graph: its modules, or its error."""

    def __init__(self, modules: Optional[tuple] = None, error: Optional[BaseException] = None):
        self.modules = modules
        self.error = error

    def describe(self) -> str:
        if self.error is not None:
            return f"{type(self.error).__name__}: {self.error}"
        fw, _ = self.modules
        return f"saved {parity.saved_value_names(fw, 0)}"


def _run(fn: Callable[[], tuple]) -> Outcome:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return Outcome(modules=fn())
    except Exception as e:  # compared by the caller
        return Outcome(error=e)


class Run:
    """The outcomes of torch, remat and remat with one switch flipped on the
    joint graph(s) aot_function handed the partition function."""

    def __init__(self) -> None:
        self.graphs: list[dict[str, Any]] = []


def partition_three_ways(fn: Callable, inputs: list, switch: str, *,
                         partitioner: str = "min_cut",
                         joint_hook: Optional[Callable[[fx.GraphModule], None]] = None,
                         config: Optional[dict] = None) -> Run:
    """Compiles `fn` with aot_function; its partition function runs, on copies
    of each joint graph (after `joint_hook`), torch's partitioner, remat's
    drop-in and remat with `switch` flipped, then hands the compilation
    torch's result (or raises torch's error)."""
    run = Run()
    flipped = not _release.behaves(switch)

    def partition_fn(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        if joint_hook is not None:
            joint_hook(joint)
            joint.recompile()
        kw = {"num_fwd_outputs": kwargs["num_fwd_outputs"],
              "static_lifetime_input_indices": kwargs.get("static_lifetime_input_indices")}
        theirs = _run(lambda: _TORCH[partitioner](copy_graph_module(joint), joint_inputs, **kwargs))
        ours = _run(lambda: getattr(rt, _TORCH[partitioner].__name__)(
            copy_graph_module(joint), joint_inputs, **kwargs))
        options = {**rt.options_from_torch(), "torch_switches": {switch: flipped}}
        other = _run(lambda: _modules(rt.partition(copy_graph_module(joint), partitioner=partitioner,
                                                   options=options, **kw)))
        run.graphs.append({"torch": theirs, "remat": ours, "flipped": other,
                           "num_fwd_outputs": kw["num_fwd_outputs"]})
        if theirs.error is not None:
            raise theirs.error
        return theirs.modules

    def nop(gm: fx.GraphModule, _inputs: Any) -> fx.GraphModule:
        return gm

    patch = torch._functorch.config.patch(config or {})
    with patch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = aot_function(fn, fw_compiler=nop, bw_compiler=nop, partition_fn=partition_fn)
        try:
            out = compiled(*inputs)
            loss = sum(o.sum() for o in (out if isinstance(out, (tuple, list)) else (out,))
                       if isinstance(o, torch.Tensor) and o.requires_grad)
            if isinstance(loss, torch.Tensor):
                loss.backward()
        except Exception:
            if not run.graphs:
                raise
    assert run.graphs, "aot_function never called the partition function"
    return run


def _modules(p: Any) -> tuple:
    return p.forward, p.backward


def _same(a: Outcome, b: Outcome, num_fwd_outputs: int) -> list[str]:
    """The differences between two outcomes; errors compare by type name and text."""
    if a.error is not None or b.error is not None:
        if a.error is None or b.error is None:
            return [f"one side raised: {a.describe()} | {b.describe()}"]
        return [] if str(a.error) == str(b.error) else [f"errors differ: {a.describe()} | {b.describe()}"]
    return parity.partition_diffs(a.modules, b.modules, num_fwd_outputs)


def assert_parity(run: Run, *, switch_matters: bool = True) -> None:
    """remat matches torch on every graph; with `switch_matters`, flipping the
    switch changes remat's answer on at least one of them."""
    problems = []
    changed = False
    for i, g in enumerate(run.graphs):
        n = g["num_fwd_outputs"]
        diffs = _same(g["torch"], g["remat"], n)
        if diffs:
            problems.append(f"graph {i}: torch {g['torch'].describe()}, remat {g['remat'].describe()}\n"
                            + "\n\n".join(diffs))
        changed |= bool(_same(g["remat"], g["flipped"], n))
    assert not problems, "\n\n".join(problems)
    if switch_matters:
        assert changed, "flipping the switch did not change remat's answer: the graph does not exercise it"


def assert_torch_raised(run: Run, text: str) -> None:
    """torch raised `text` on some graph, and remat raised a RuntimeError with the same text."""
    raised = [g for g in run.graphs if g["torch"].error is not None]
    assert raised, "torch did not raise"
    for g in raised:
        assert text in str(g["torch"].error), g["torch"].describe()
        assert isinstance(g["remat"].error, RuntimeError), g["remat"].describe()
        assert str(g["remat"].error) == str(g["torch"].error)


def _ops(gm: fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


# --- cse_partition_key (2.14) ---------------------------------------------------------


class _RecomputeMatmul(torch.autograd.Function):
    """A backward that computes x @ w again."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * x.cos() + x @ w, None


def _forward_only_matmul(x, w):
    with torch.no_grad():
        side = (x @ w) * 2  # the forward's x @ w, which no gradient needs
    return _RecomputeMatmul.apply(x, w), side


def test_cse_partition_key():
    """2.13 merges the backward's x @ w into the forward-only one and saves
    it; 2.14 on keeps them apart (the forward computes mm twice)."""
    x = torch.randn(16, 16, requires_grad=True)
    w = torch.randn(16, 16)
    run = partition_three_ways(_forward_only_matmul, [x, w], "cse_partition_key")
    assert_parity(run)
    fw, _ = run.graphs[0]["remat"].modules
    mms = _ops(fw).count(aten.mm.default)
    assert mms == (2 if _release.behaves("cse_partition_key") else 1)


# --- cse_float_bit_keys (2.14) --------------------------------------------------------

_NAN_A, _NAN_B = float("nan"), float("nan")  # two objects, as a traced graph holds them
_NEG_NAN_A, _NEG_NAN_B = -float("nan"), -float("nan")  # the sign bit set

_FLOAT_CASES = {
    # 2.13: -0.0 == 0.0, the two products merge; 2.14: different bits.
    "signed_zero": lambda x: (((x * 0.0) + 1.0) * ((x * -0.0) + 2.0),),
    # 2.13: NaN equals nothing; 2.14: equal bits merge.
    "nan": lambda x: (((x + _NAN_A) + 1.0) * ((x + _NAN_B) + 2.0),),
    # The exporter keeps a NaN's sign bit, or 2.14 could not tell -nan from nan.
    "negative_nan": lambda x: (((x + _NEG_NAN_A) + 1.0) * ((x + _NEG_NAN_B) + 2.0)
                               * ((x + _NAN_A) + 3.0),),
}


@pytest.mark.parametrize("case", sorted(_FLOAT_CASES))
def test_cse_float_bit_keys(case):
    x = torch.randn(8, requires_grad=True)
    run = partition_three_ways(_FLOAT_CASES[case], [x], "cse_float_bit_keys")
    assert_parity(run)


# --- cse_skip_impure (2.14) -----------------------------------------------------------


def _two_draws(x):
    # randn_like is random, but not among compile_utils.rand_ops: 2.13 merges
    # the two draws into one. (The backward needs both, so the partition key
    # of 2.14 does not keep them apart by itself.)
    return (x.sin() * torch.randn_like(x) * torch.randn_like(x),)


def _two_attentions(q, k, v):
    # The CPU flash-attention op is nondeterministic_seeded, so impure.
    F = torch.nn.functional
    return (F.scaled_dot_product_attention(q, k, v) * 2 + F.scaled_dot_product_attention(q, k, v),)


@pytest.mark.parametrize("case", ["randn_like", "sdpa"])
def test_cse_skip_impure(case):
    if case == "randn_like":
        run = partition_three_ways(_two_draws, [torch.randn(8, requires_grad=True)], "cse_skip_impure")
    else:
        q = torch.randn(1, 2, 8, 4, requires_grad=True)
        k, v = torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4)
        run = partition_three_ways(_two_attentions, [q, k, v], "cse_skip_impure")
    assert_parity(run)


# --- cse_custom_context_key (2.14) ----------------------------------------------------


def _second_sin_on_stream(joint: fx.GraphModule) -> None:
    """What dynamo stamps on nodes traced under torch.cuda.stream(...)."""
    sins = [n for n in joint.graph.nodes if n.target is aten.sin.default]
    sins[1].meta["custom"] = {"stream": 1}


def test_cse_custom_context_key():
    x = torch.randn(8, requires_grad=True)
    run = partition_three_ways(lambda x: ((x.sin() + 1.0) * (x.sin() + 2.0),), [x],
                               "cse_custom_context_key", joint_hook=_second_sin_on_stream)
    assert_parity(run)


# --- cse_keep_mutation_bases (2.14) ---------------------------------------------------

_OPS: dict[str, Any] = {}


def _add_into() -> Any:
    """A custom op that adds x into a buffer in place (AOTAutograd
    functionalizes each call into an auto_functionalized node)."""
    if "add_into" not in _OPS:
        @torch.library.custom_op("remat_release_prepare::add_into", mutates_args=("buf",))
        def add_into(buf: torch.Tensor, x: torch.Tensor) -> None:
            buf.add_(x)

        @add_into.register_fake
        def _(buf, x):
            return None

        _OPS["add_into"] = add_into
    return _OPS["add_into"]


def _two_mutated_buffers(x):
    add_into = _add_into()
    b1 = torch.ones(8)
    add_into(b1, x.detach())
    b2 = torch.ones(8)  # 2.13 merges this factory call into b1's
    add_into(b2, x.detach() * 2)
    return (x.sin() * b1 * b2,)


def test_cse_keep_mutation_bases():
    run = partition_three_ways(_two_mutated_buffers, [torch.randn(8, requires_grad=True)],
                               "cse_keep_mutation_bases")
    assert_parity(run)


# --- functional_graph_allows_shallow_copy_data (2.14) ---------------------------------


def _checkpointed_sin_then_shallow_copy_data(joint: fx.GraphModule) -> None:
    """A recompute-tagged sin, and `primals_2.data = sin` as AOTAutograd's
    2.14 epilogue writes it."""
    from torch.utils.checkpoint import CheckpointPolicy

    g = joint.graph
    nodes = {n.name: n for n in g.nodes}
    sin = nodes["sin"]
    sin.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
    sin.meta["ac_graph_id"] = 1
    with g.inserting_after(sin):
        data = g.call_function(aten.shallow_copy_data_.default, (nodes["primals_2"], sin))
    data.meta["val"] = nodes["primals_2"].meta["val"]


def test_functional_graph_allows_shallow_copy_data():
    """2.14 keeps the graph with default_partition, which then refuses the
    impure op under recompute tags; the 2.13 rule hands it to the min-cut."""
    if not hasattr(aten, "shallow_copy_data_"):
        pytest.skip("aten.shallow_copy_data_ does not exist before torch 2.14")
    x, buf = torch.randn(8, requires_grad=True), torch.randn(8)
    run = partition_three_ways(lambda x, b: (x.sin().cos(),), [x, buf],
                               "functional_graph_allows_shallow_copy_data", partitioner="default",
                               joint_hook=_checkpointed_sin_then_shallow_copy_data)
    assert_parity(run)
    assert_torch_raised(run, "Trying to apply AC on a graph with impure op")


# --- collective_leaf_getitems (2.15) --------------------------------------------------


@pytest.fixture
def one_rank_group(tmp_path):
    """A gloo process group of one rank: functional collectives really run."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield dist.group.WORLD.group_name
    if owned:
        dist.destroy_process_group()


def _collectives_are_slow() -> Any:
    """The memory budget's runtime estimator: a collective costs 100, anything else 1."""
    from torch._inductor.custom_graph_pass import CustomRuntimeEstimator

    class CollectivesAreSlow(CustomRuntimeEstimator):
        def __call__(self, node: fx.Node) -> float:
            return 100.0 if getattr(node.target, "namespace", None) == "_c10d_functional" else 1.0

        def uuid(self) -> str:
            return "remat-test-collectives-are-slow"

    return CollectivesAreSlow()


def test_collective_leaf_getitems(one_rank_group):
    """2.15 saves the getitems of a coalesced all-gather instead of the
    collective, which then becomes a knapsack item (banned as a non-builtin op
    in the aggressive tier, no longer MUST_SAVE): under a 0.5 budget where
    collectives are slow, the knapsack's choice changes."""
    c10d = torch.ops._c10d_functional

    def f(x, w):
        d = x.detach()
        outs = c10d.all_gather_into_tensor_coalesced([d.sin(), d.cos()], 1, one_rank_group)
        a = c10d.wait_tensor(outs[0])
        b = c10d.wait_tensor(outs[1])
        h = torch.mm(x, w).relu()
        return (torch.mm(h, w).sin() * a * b).sum()

    x, w = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    run = partition_three_ways(f, [x, w], "collective_leaf_getitems",
                               config={"activation_memory_budget": 0.5,
                                       "is_non_builtin_to_include": True,
                                       "activation_memory_budget_runtime_estimator":
                                           _collectives_are_slow()})
    assert_parity(run)


# --- effectful_recompute_policy (2.15) ------------------------------------------------


def _effectful_scale() -> Any:
    """A custom op registered with an ORDERED effect: AOTAutograd threads
    effect tokens through it with the with_effects HOP."""
    if "scale" not in _OPS:
        from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

        lib = torch.library.Library("remat_release_effects", "DEF")
        lib.define("scale(Tensor x) -> Tensor")
        lib.impl("scale", lambda x: x * 2, "CompositeExplicitAutograd")
        lib.impl("scale", lambda x: torch.empty_like(x), "Meta")
        _register_effectful_op(torch.ops.remat_release_effects.scale.default, _EffectType.ORDERED)
        _OPS["scale"] = (lib, torch.ops.remat_release_effects.scale)
    return _OPS["scale"][1]


def _tag_with_effects(policy_name: str) -> Callable[[fx.GraphModule], None]:
    def hook(joint: fx.GraphModule) -> None:
        from torch.utils.checkpoint import CheckpointPolicy

        for n in joint.graph.find_nodes(op="call_function", target=torch.ops.higher_order.with_effects):
            n.meta["recompute"] = CheckpointPolicy[policy_name]
            n.meta["ac_graph_id"] = 0
    return hook


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("policy", ["MUST_RECOMPUTE", "PREFER_RECOMPUTE"])
def test_effectful_recompute_policy(policy, partitioner):
    """2.15 raises for MUST_RECOMPUTE on an effectful op (torch's text, word
    for word) where 2.14 partitions; PREFER_RECOMPUTE no longer exempts the
    op from saving its outputs (which changes tags, not these graphs)."""
    scale = _effectful_scale()

    def f(x):
        return torch.sin(x) * scale(x.detach())

    run = partition_three_ways(f, [torch.randn(8, requires_grad=True)], "effectful_recompute_policy",
                               partitioner=partitioner, joint_hook=_tag_with_effects(policy))
    assert_parity(run, switch_matters=policy == "MUST_RECOMPUTE")
    if policy == "MUST_RECOMPUTE" and _release.behaves("effectful_recompute_policy"):
        assert_torch_raised(run, "AOTAutograd does not support MUST_RECOMPUTE for effectful operations")


# --- impure_checks_packet_default (2.13) ----------------------------------------------


def _dead_packet_nodes(joint: fx.GraphModule) -> None:
    """What a joint pass calling packets (torch.ops.aten.rand, not
    aten.rand.default) leaves behind: a dead random node and a dead in-place
    one."""
    g = joint.graph
    sin = next(n for n in g.nodes if n.target is aten.sin.default)
    with g.inserting_after(sin):
        rand = g.call_function(aten.rand, ([3],), name="dead_rand")
    rand.meta["val"] = sin.meta["val"].new_empty(3)
    with g.inserting_after(rand):
        relu_ = g.call_function(aten.relu_, (sin,), name="dead_relu_")
    relu_.meta["val"] = sin.meta["val"]


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_impure_checks_packet_default(partitioner):
    """2.13 on, dead-code elimination keeps the dead aten.rand packet node
    (its .default is random) and the dead aten.relu_ one (its .default
    mutates); 2.12 and 2.11 remove both."""
    x = torch.randn(3, requires_grad=True)
    run = partition_three_ways(lambda x: ((x.sin() * 2).sum(),), [x], "impure_checks_packet_default",
                               partitioner=partitioner, joint_hook=_dead_packet_nodes)
    assert_parity(run)
    fw, _ = run.graphs[0]["remat"].modules
    names = {n.name for n in fw.graph.nodes}
    kept = _release.behaves("impure_checks_packet_default")
    assert ("dead_rand" in names) == kept and ("dead_relu_" in names) == kept


# --- fx_name_count_by_base (2.12) -----------------------------------------------------


def _rename_for_a_name_collision(joint: fx.GraphModule) -> None:
    """Names a joint pass might leave: the second primal "Mul_7" (FX names its
    backward placeholder "mul_7", taking the name of the backward's own
    mul_7), and the forward's mul_3 renamed, which frees "mul_3" in the
    backward. When the backward's mul_7 is copied, its name is taken: 2.11
    takes the smallest free mul_K (mul_3), 2.12 on continues after the last
    mul number used (mul_8), and every later name shifts."""
    nodes = {n.name: n for n in joint.graph.nodes}
    nodes["primals_2"]._rename("Mul_7")
    nodes["mul_3"]._rename("scaled")


def _sin_products(x, w):
    a = x.sin() * w
    b = a * 3
    return ((b * a).cos() * 5,)


def test_fx_name_count_by_base():
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    run = partition_three_ways(_sin_products, [x, w], "fx_name_count_by_base",
                               joint_hook=_rename_for_a_name_collision)
    assert_parity(run)
    _, bw = run.graphs[0]["remat"].modules
    names = [n.name for n in bw.graph.nodes]
    assert ("mul_3" in names) != _release.behaves("fx_name_count_by_base"), names
