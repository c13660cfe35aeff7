"""Parity of the release switches that decide what is saved, and where.

Contract pinned here: for each switch of the "saved" group (remat/torch_release.h:
opaque_values_saved, drop_assert_only_symbool, default_skips_assert_only_symbool,
default_skips_assert_async, generator_is_opaque, script_object_size_flag,
size_of_no_return_ops, sdpa_zero_dropout_not_random, bind_unreplaced_symbols,
wait_tensors_like_wait_tensor, device_valued_nodes) a joint graph that exercises
the difference is partitioned by the running torch's own partitioner and by
remat's drop-in, on copies, and the two agree: the same saved values and the
same forward and backward graphs (parity.py), or both raise where torch
raises. remat with the switch flipped then gives another answer, so each test
fails if its switch breaks, whichever release runs it.

The graphs are captured live with aot_function (a partition function that
runs every side inside AOTAutograd's own context) or built by hand as FX
graphs with fake-tensor metadata, as the release notes' repros do.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import operator
import warnings
from typing import Any, Callable, Optional

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch._functorch import partitioners
from torch._functorch.aot_autograd import aot_function
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import CheckpointPolicy

import parity
import remat

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

RUNNING = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])


def _since(switch: str) -> tuple[int, int]:
    for name, since, *_ in remat.torch_releases()["switches"]:
        if name == switch:
            major, minor = since.split(".")[:2]
            return int(major), int(minor)
    raise KeyError(switch)


def _on(switch: str) -> bool:
    """Whether the running release has the switch's behavior."""
    return RUNNING >= _since(switch)


# --- running the three sides --------------------------------------------------------


def _copy(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of a joint graph whose node meta values are shared (as AOTAutograd's)."""
    with torch._subclasses.fake_tensor.unset_fake_temporarily(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return copy.deepcopy(gm)


def _torch_fn(partitioner: str) -> Callable:
    return (partitioners.min_cut_rematerialization_partition if partitioner == "min_cut"
            else partitioners.default_partition)


def _remat_fn(partitioner: str) -> Callable:
    return (rt.min_cut_rematerialization_partition if partitioner == "min_cut"
            else rt.default_partition)


def _outcome(call: Callable[[], Any]) -> tuple[Optional[tuple], Optional[BaseException]]:
    try:
        return call(), None
    except Exception as e:  # noqa: BLE001 - compared below
        return None, e


class Sides:
    """torch's, remat's and remat-with-the-switch-flipped partitions of one joint graph."""

    def __init__(self, joint: fx.GraphModule, num_fwd_outputs: int, partitioner: str,
                 switch: str, joint_inputs: Any = None, **options: Any) -> None:
        self.num_fwd_outputs = num_fwd_outputs
        self.partitioner = partitioner
        self.switch = switch
        kw = {"num_fwd_outputs": num_fwd_outputs}
        a, b, c = _copy(joint), _copy(joint), _copy(joint)
        self.torch, self.torch_error = _outcome(lambda: _torch_fn(partitioner)(a, joint_inputs, **kw))
        if options:
            # Options torch reads from a flag the running release may lack.
            self.remat, self.remat_error = _outcome(lambda: self._remat(b, options))
        else:
            self.remat, self.remat_error = _outcome(lambda: _remat_fn(partitioner)(b, joint_inputs, **kw))
        flipped = {**options, "torch_switches": {switch: not _on(switch)}}
        self.flipped, self.flipped_error = _outcome(lambda: self._remat(c, flipped))

    def _remat(self, joint: fx.GraphModule, overrides: dict) -> tuple:
        p = rt.partition(joint, num_fwd_outputs=self.num_fwd_outputs, partitioner=self.partitioner,
                         options=rt.options_from_torch(**overrides))
        return p.forward, p.backward

    def saved(self, side: Optional[tuple]) -> list[str]:
        assert side is not None
        return parity.saved_value_names(side[0], self.num_fwd_outputs)

    def assert_remat_matches_torch(self, label: str) -> None:
        if self.torch_error is not None:
            assert self.remat_error is not None, (
                f"{label}: torch raised {type(self.torch_error).__name__}: {self.torch_error}; "
                f"remat did not")
            assert isinstance(self.remat_error, remat.RematError), repr(self.remat_error)
            return
        assert self.remat_error is None, f"{label}: remat raised {self.remat_error!r}"
        parity.assert_same_partition(self.torch, self.remat, self.num_fwd_outputs, label)

    def assert_flip_changes_the_answer(self, label: str) -> None:
        """remat with the switch flipped answers differently (the graph exercises it)."""
        if (self.remat_error is None) != (self.flipped_error is None):
            return
        if self.remat_error is not None:
            assert str(self.remat_error) != str(self.flipped_error), (
                f"{label}: remat raised the same either way: {self.remat_error!r}")
            return
        diffs = parity.partition_diffs(self.remat, self.flipped, self.num_fwd_outputs)
        assert diffs, f"{label}: flipping {self.switch} changed nothing"


@contextlib.contextmanager
def _in_tmp_dir(path):
    """torch's failing min-cut writes min_cut_failed_* files into the working directory."""
    import os

    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _nop(gm: fx.GraphModule, _inputs: Any) -> Callable:
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def _live(fn: Callable, inputs: tuple, check: Callable[..., None], *,
          hook: Optional[Callable[[fx.GraphModule], None]] = None, **aot_kwargs: Any) -> None:
    """Traces `fn` with aot_function; inside its partition function (so in
    AOTAutograd's tracing and fake-tensor context) calls
    check(joint, joint_inputs, num_fwd_outputs) on the joint graph (after
    `hook`), then lets torch partition it so the compile goes on."""
    seen = []

    def partition_fn(joint, joint_inputs, *, num_fwd_outputs, **kw):
        if hook is not None:
            hook(joint)
            joint.recompile()
        pristine = _copy(joint)
        check(pristine, joint_inputs, num_fwd_outputs)
        seen.append(True)
        return partitioners.min_cut_rematerialization_partition(
            joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kw)

    compiled = aot_function(fn, fw_compiler=_nop, bw_compiler=_nop, partition_fn=partition_fn,
                            **aot_kwargs)
    try:
        out = compiled(*inputs)
        loss = sum(o.sum() for o in (out if isinstance(out, (tuple, list)) else (out,))
                   if isinstance(o, torch.Tensor) and o.requires_grad)
        if isinstance(loss, torch.Tensor):
            loss.backward()
    except Exception:
        if not seen:
            raise  # running the compiled graphs is not the point; partitioning is
    assert seen, "no joint graph reached the partition function"


def _names(gm: fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


# --- sdpa_zero_dropout_not_random (2.14) --------------------------------------------


def _tag_attention(joint: fx.GraphModule) -> None:
    """Marks the forward attention op MUST_RECOMPUTE, as a checkpoint policy would."""
    for n in joint.graph.nodes:
        if (n.op == "call_function" and "scaled_dot_product" in str(n.target)
                and "backward" not in str(n.target)):
            n.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            n.meta["ac_graph_id"] = 1


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_sdpa_zero_dropout_not_random(partitioner):
    """Checkpointed attention without dropout: 2.13 and older replay its RNG
    state in the backward (a random op by its tag); 2.14 on, with dropout_p
    statically 0, it is not random and is recomputed plainly."""
    results = []

    def check(joint, joint_inputs, num_fwd_outputs):
        sides = Sides(joint, num_fwd_outputs, partitioner, "sdpa_zero_dropout_not_random",
                      joint_inputs)
        sides.assert_remat_matches_torch(f"attention/{partitioner}")
        sides.assert_flip_changes_the_answer(f"attention/{partitioner}")
        results.append(sides)

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 4, requires_grad=True) for _ in range(3))
    _live(lambda q, k, v: (F.scaled_dot_product_attention(q, k, v).sin(),), (q, k, v), check,
          hook=_tag_attention)
    (sides,) = results
    replayed = any("run_and_save_rng_state" in t for t in _names(sides.torch[0]))
    assert replayed == (not _on("sdpa_zero_dropout_not_random")), _names(sides.torch[0])


# --- bind_unreplaced_symbols (2.14) -------------------------------------------------


def test_bind_unreplaced_symbols():
    """x: [s0], y: [s1] (no duck shaping) and their sizes as SymInt inputs;
    x * y makes the ShapeEnv replace s1 by s0. 2.14 on, the backward also
    binds y's raw s1 (one more saved SymInt); 2.13 and older only s0."""
    from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)
    results = []

    def check(joint, joint_inputs, num_fwd_outputs):
        sides = Sides(joint, num_fwd_outputs, "min_cut", "bind_unreplaced_symbols", joint_inputs)
        sides.assert_remat_matches_torch("unreplaced symbols")
        sides.assert_flip_changes_the_answer("unreplaced symbols")
        results.append(sides)

    mode = FakeTensorMode(shape_env=ShapeEnv(duck_shape=False))
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC])
    x = mode.from_tensor(torch.randn(6), symbolic_context=ctx).requires_grad_()
    y = mode.from_tensor(torch.randn(6), symbolic_context=ctx).requires_grad_()
    with mode:
        _live(lambda x, y, n0, n1: ((x * y).sin(),), (x, y, x.shape[0], y.shape[0]), check)
    (sides,) = results
    saved = sides.saved(sides.torch)
    assert ("primals_4" in saved) == _on("bind_unreplaced_symbols"), saved


# --- hand-built joint graphs ----------------------------------------------------------


def _graph(build: Callable[[fx.Graph, FakeTensorMode], list]) -> fx.GraphModule:
    g = fx.Graph()
    mode = FakeTensorMode()
    g.output(build(g, mode))
    return fx.GraphModule(torch.nn.Module(), g)


def _node(g: fx.Graph, target: Any, args: tuple, val: Any, kwargs: Optional[dict] = None,
          tag: Optional[str] = None) -> fx.Node:
    n = g.call_function(target, args, kwargs or {})
    if val is not _NO_VAL:
        n.meta["val"] = val
    if tag is not None:
        n.meta["partitioner_tag"] = tag
    return n


_NO_VAL = object()


def _placeholder(g: fx.Graph, name: str, val: Any, tag: Optional[str] = None) -> fx.Node:
    p = g.placeholder(name)
    p.meta["val"] = val
    if tag is not None:
        p.meta["partitioner_tag"] = tag
    return p


# --- opaque_values_saved (2.12) ---------------------------------------------------------


def _opaque_types():
    from torch._library.opaque_object import register_opaque_type
    from torch._opaque_base import OpaqueBase

    class Handle(OpaqueBase):
        pass

    register_opaque_type(Handle, typ="reference")
    return Handle


_HANDLE = None


def _handle():
    global _HANDLE
    if _HANDLE is None:
        _HANDLE = _opaque_types()
    return _HANDLE()


class Mode(enum.Enum):
    A = 1


def make_handle(x):  # call_function targets of the hand-built graphs
    return None


def use_handle(t, h):
    return t * 2


def _opaque_graph(kind: str, placeholder: bool) -> fx.GraphModule:
    """sin(p) in the forward; an opaque value h (a registered opaque type's
    instance, or an Enum member: opaque from 2.12 on) from a forward
    call_function, or a placeholder before the tensor primal; the backward
    reads h: use_handle(tangent, h) * cos(p)."""
    def build(g, mode):
        with mode:
            x = torch.randn(4)
        val = _handle() if kind == "handle" else Mode.A
        if placeholder:
            h = _placeholder(g, "primals_1", val)
        p = _placeholder(g, "primals_2" if placeholder else "primals_1", x)
        t = _placeholder(g, "tangents_1", x)
        if not placeholder:
            h = _node(g, make_handle, (p,), val, tag="is_forward")
        sin = _node(g, torch.ops.aten.sin.default, (p,), x, tag="is_forward")
        m = _node(g, use_handle, (t, h), x)
        c = _node(g, torch.ops.aten.cos.default, (p,), x)
        grad = _node(g, torch.ops.aten.mul.Tensor, (m, c), x)
        return [sin, None, grad] if placeholder else [sin, grad]

    return _graph(build)


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("placeholder", [False, True], ids=["call_function", "placeholder"])
@pytest.mark.parametrize("kind", ["handle", "enum"])
def test_opaque_values_saved(kind, placeholder, partitioner, tmp_path):
    """2.12 on, opaque values cost nothing to save and get their own slot
    after the tensors; 2.11 has no such notion (a non-tensor: infinite to
    save in the min-cut, "expected a tensor" in default_partition, the tensor
    slot for a placeholder, where an Enum member, a plain constant to 2.11,
    makes its symbol binding assert)."""
    joint = _opaque_graph(kind, placeholder)
    num_fwd = 2 if placeholder else 1
    with _in_tmp_dir(tmp_path):
        sides = Sides(joint, num_fwd, partitioner, "opaque_values_saved")
    label = f"{kind}/{'placeholder' if placeholder else 'call_function'}/{partitioner}"
    sides.assert_remat_matches_torch(label)
    if kind == "enum" and not _on("opaque_values_saved"):
        return  # the running torch exports an Enum as a plain constant: nothing to flip
    sides.assert_flip_changes_the_answer(label)
    if _on("opaque_values_saved"):
        h = "primals_1" if placeholder else "make_handle"
        assert sides.saved(sides.torch)[-1] == h, sides.saved(sides.torch)


# --- generator_is_opaque (2.13) -----------------------------------------------------------


def _generator_graph(tangent_dependent: bool) -> fx.GraphModule:
    """A Generator primal read by backward-tagged random ops: randn(generator=g),
    or a tangent-dependent normal(tangent, generator=g) that only the
    backward can compute."""
    aten = torch.ops.aten

    def build(g, mode):
        gen = _placeholder(g, "primals_1", torch.Generator(), tag="is_forward")
        with mode:
            xv = mode.from_tensor(torch.randn(4))
            tv = mode.from_tensor(torch.randn(4))
            x = _placeholder(g, "primals_2", xv, tag="is_forward")
            t = _placeholder(g, "tangents_1", tv)
            y = _node(g, aten.sin.default, (x,), torch.sin(xv), tag="is_forward")
            noise = _node(g, aten.randn.generator, ([4],), torch.empty(4), {"generator": gen},
                          tag="is_backward")
            c = _node(g, aten.cos.default, (x,), torch.cos(xv), tag="is_backward")
            m = _node(g, aten.mul.Tensor, (t, c), torch.empty(4), tag="is_backward")
            if tangent_dependent:
                noise = _node(g, aten.normal.Tensor_float, (t, 1.0), torch.empty(4),
                              {"generator": gen}, tag="is_backward")
            gx = _node(g, aten.mul.Tensor, (m, noise), torch.empty(4), tag="is_backward")
        return [y, gx, None]

    return _graph(build)


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("tangent_dependent", [False, True], ids=["randn", "normal"])
def test_generator_is_opaque(tangent_dependent, partitioner, tmp_path):
    """2.13 on, a torch.Generator value is opaque: savable for free, in the
    opaque slot after the tensors; 2.12 and older save it in the tensor slot
    (default_partition) and cannot save it at all (min-cut)."""
    import torch._prims.rng_prims  # noqa: F401  (2.13 registers Generator on this import)

    joint = _generator_graph(tangent_dependent)
    with _in_tmp_dir(tmp_path):
        sides = Sides(joint, 1, partitioner, "generator_is_opaque")
    label = f"generator/{'normal' if tangent_dependent else 'randn'}/{partitioner}"
    sides.assert_remat_matches_torch(label)
    if partitioner == "min_cut" and not tangent_dependent:
        return  # the random op itself is saved either way: the generator never is
    if not _on("opaque_values_saved"):
        return  # 2.11 has no opaque values at all: flipping this switch alone changes nothing
    sides.assert_flip_changes_the_answer(label)


# --- drop_assert_only_symbool (2.12), default_skips_assert_only_symbool (2.13) -----------


def _assert_only_symbool_graph() -> fx.GraphModule:
    """A dynamic size s0 as primals_1; ge = s0 >= 2, computed in the forward
    and read only by an _assert_scalar in the backward."""
    from torch.fx.experimental.symbolic_shapes import (DimDynamic, ShapeEnv,
                                                       StatelessSymbolicContext)

    def build(g, _mode):
        mode = FakeTensorMode(shape_env=ShapeEnv())
        x = mode.from_tensor(torch.randn(8), symbolic_context=StatelessSymbolicContext(
            dynamic_sizes=[DimDynamic.DYNAMIC]))
        s0 = x.shape[0]
        p1 = _placeholder(g, "primals_1", s0)
        p2 = _placeholder(g, "primals_2", x)
        t1 = _placeholder(g, "tangents_1", x)
        ge = _node(g, operator.ge, (p1, 2), s0 >= 2, tag="is_forward")
        with mode:
            sv, mv = torch.sin(x), x * 2
        sin = _node(g, torch.ops.aten.sin.default, (p2,), sv, tag="is_forward")
        _node(g, torch.ops.aten._assert_scalar.default, (ge, "s0 >= 2 in backward"), None,
              tag="must_be_in_backward")
        mul = _node(g, torch.ops.aten.mul.Tensor, (t1, 2), mv)
        return [sin, None, mul]

    return _graph(build)


def test_drop_assert_only_symbool():
    """min-cut: 2.12 on, a SymBool whose only users are runtime asserts is
    not saved; 2.11 saves it (an extra forward output / backward input)."""
    sides = Sides(_assert_only_symbool_graph(), 1, "min_cut", "drop_assert_only_symbool")
    sides.assert_remat_matches_torch("assert-only SymBool/min_cut")
    sides.assert_flip_changes_the_answer("assert-only SymBool/min_cut")
    assert ("ge" in sides.saved(sides.torch)) == (not _on("drop_assert_only_symbool"))


def test_default_skips_assert_only_symbool():
    """default_partition: 2.13 on, a SymBool that only feeds _assert_scalar
    is not saved (the backward recomputes it); 2.12 and older save it."""
    results = []

    def f(x):
        torch.ops.aten._assert_scalar.default(x.shape[0] >= 2, "need two rows")
        return (x.sin() * 2).sum()

    def check(joint, joint_inputs, num_fwd_outputs):
        sides = Sides(joint, num_fwd_outputs, "default", "default_skips_assert_only_symbool",
                      joint_inputs)
        sides.assert_remat_matches_torch("assert-only SymBool/default")
        sides.assert_flip_changes_the_answer("assert-only SymBool/default")
        results.append(sides)

    _live(f, (torch.randn(4, 3, requires_grad=True),), check, dynamic=True)
    (sides,) = results
    assert ("ge" in sides.saved(sides.torch)) == (not _on("default_skips_assert_only_symbool"))


# --- default_skips_assert_async (2.13) --------------------------------------------------------


def test_default_skips_assert_async():
    """default_partition under recompute tags: 2.13 skips _assert_async like
    _assert_scalar; 2.12 and older count it an impure value and refuse to
    apply activation checkpointing ("Trying to apply AC ...")."""
    results = []

    def f(x):
        y = x.sin().cos()
        torch.ops.aten._assert_async.msg(y.sum() > -100, "boom")
        return (y * 2).sum()

    def tag_region(joint):
        # The forward's sin, as a checkpointed region's node.
        sin = next(n for n in joint.graph.nodes if n.target is torch.ops.aten.sin.default)
        sin.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
        sin.meta["ac_graph_id"] = 1

    def check(joint, joint_inputs, num_fwd_outputs):
        sides = Sides(joint, num_fwd_outputs, "default", "default_skips_assert_async",
                      joint_inputs)
        sides.assert_remat_matches_torch("_assert_async/default")
        sides.assert_flip_changes_the_answer("_assert_async/default")
        results.append(sides)

    _live(f, (torch.randn(4, requires_grad=True),), check, hook=tag_region)
    (sides,) = results
    if _on("default_skips_assert_async"):
        assert sides.torch_error is None, sides.torch_error
    else:
        assert "Trying to apply AC on a graph with impure op" in str(sides.torch_error)
        assert "Trying to apply AC on a graph with impure op" in str(sides.remat_error)


# --- script_object_size_flag, size_of_no_return_ops (2.13) -------------------------------


def _script_object() -> Any:
    return torch.ops.quantized.linear_prepack(
        torch.quantize_per_tensor(torch.randn(4, 4), 0.1, 0, torch.qint8), None)


def _sized_argument_graph(arg: str) -> fx.GraphModule:
    """A recomputable op r = add(p, a) with a small value, needed by the
    backward, whose inputs the min-cut's reduction rule sizes: `a` is a
    script-object placeholder, or a value-less _assert_async (an op that
    returns nothing)."""
    aten = torch.ops.aten

    def build(g, mode):
        with mode:
            big = torch.empty(64)
            small = torch.empty(2)
        p = _placeholder(g, "primals_1", big)
        if arg == "script_object":
            a = _placeholder(g, "primals_2", _script_object())
        t = _placeholder(g, "tangents_1", small)
        if arg == "no_return":
            a = _node(g, aten._assert_async.msg, (p, "m"), _NO_VAL)
        r = _node(g, aten.add.Tensor, (p, a), small)
        y = _node(g, aten.cos.default, (r,), small)
        grad = _node(g, aten.mul.Tensor, (t, r), small)
        outs = [y, grad]
        if arg == "script_object":
            outs.append(None)
        return outs

    return _graph(build)


@pytest.mark.parametrize("flag", [False, True], ids=["without_flag", "with_flag"])
def test_script_object_size_flag(flag):
    """_size_of of a script object: 2.13 on, 0 under
    config.unsafe_treat_script_objects_as_zero_size (else an error); 2.11 and
    2.12 have no such flag and cannot size it (remat ignores the option there)."""
    joint = _sized_argument_graph("script_object")
    num_fwd = 1
    options = {"unsafe_treat_script_objects_as_zero_size": flag}
    patch = (torch._functorch.config.patch(unsafe_treat_script_objects_as_zero_size=flag)
             if hasattr(torch._functorch.config, "unsafe_treat_script_objects_as_zero_size")
             else contextlib.nullcontext())
    with patch:
        sides = Sides(joint, num_fwd, "min_cut", "script_object_size_flag", **options)
    label = f"script object/{'flag' if flag else 'no flag'}"
    sides.assert_remat_matches_torch(label)
    if flag:
        sides.assert_flip_changes_the_answer(label)
        assert (sides.torch_error is None) == _on("script_object_size_flag"), sides.torch_error
    else:
        assert sides.torch_error is not None


def test_size_of_no_return_ops():
    """_size_of of a value-less node of an op that returns nothing: 0 from
    2.13 on; before, only _assert_scalar's (others raise)."""
    sides = Sides(_sized_argument_graph("no_return"), 1, "min_cut", "size_of_no_return_ops")
    sides.assert_remat_matches_torch("no-return op")
    sides.assert_flip_changes_the_answer("no-return op")
    assert (sides.torch_error is None) == _on("size_of_no_return_ops"), sides.torch_error


# --- device_valued_nodes (2.15) --------------------------------------------------------------

_LIB = None


def _current_device_op() -> Any:
    """remat_saved::current_device() -> Device, as compile-on-one-rank's."""
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("remat_saved", "DEF")
        _LIB.define("current_device() -> Device")
        _LIB.impl("current_device", lambda: torch.device("cpu"), "CompositeExplicitAutograd")
    return torch.ops.remat_saved.current_device.default


class _MulOnes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * torch.ones(8, device=x.device)

    @staticmethod
    def backward(ctx, g):
        return g * torch.full((8,), 3.0, device=g.device)  # a backward factory op


def _point_factories_at_a_device_node(joint: fx.GraphModule) -> None:
    g = joint.graph
    first = next(n for n in g.nodes if n.op != "placeholder")
    with g.inserting_before(first):
        dev = g.call_function(_current_device_op(), ())
    dev.meta["val"] = torch.device("cpu")
    for n in g.nodes:
        if n.target in (torch.ops.aten.ones.default, torch.ops.aten.full.default) and "device" in n.kwargs:
            n.kwargs = {**n.kwargs, "device": dev}


@pytest.mark.parametrize("budget", [1.0, 0.5])
def test_device_valued_nodes(budget):
    """A node whose value is a torch.device feeding factory ops: 2.15 sizes it
    0 and never bans it (the backward recomputes it and its consumers); 2.14
    and older ban it (its consumers are saved) and cannot size it (the
    memory budget's knapsack raises)."""
    results = []

    def check(joint, joint_inputs, num_fwd_outputs):
        with torch._functorch.config.patch(activation_memory_budget=budget):
            sides = Sides(joint, num_fwd_outputs, "min_cut", "device_valued_nodes", joint_inputs)
        sides.assert_remat_matches_torch(f"device node/budget {budget}")
        sides.assert_flip_changes_the_answer(f"device node/budget {budget}")
        results.append(sides)

    def f(x):
        return torch.sin(_MulOnes.apply(x) * torch.ones(8, device=x.device))

    _live(f, (torch.randn(8, requires_grad=True),), check, hook=_point_factories_at_a_device_node)
    (sides,) = results
    if _on("device_valued_nodes"):
        assert sides.saved(sides.torch) == ["primals_1"]
    elif budget == 1.0:
        assert "ones" in sides.saved(sides.torch)


# --- wait_tensors_like_wait_tensor (2.15) -----------------------------------------------------


def _functional_collectives() -> Any:
    import torch.distributed as dist

    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed: no collectives to partition")
    ops = torch.ops._c10d_functional
    if not hasattr(ops, "wait_tensors"):
        pytest.skip(f"torch {torch.__version__} has no _c10d_functional.wait_tensors op "
                    "(it was added in 2.15), so no joint graph can hold one")
    return ops


def _dead_wait_tensors_graph(in_forward: bool) -> fx.GraphModule:
    """all_gather of the primal, waited on by a wait_tensors whose result
    nobody reads: in the forward (tagged PREFER_RECOMPUTE, so that no
    release's force_save_collectives tags it MUST_SAVE), or in the backward."""
    ops = _functional_collectives()
    aten = torch.ops.aten

    def build(g, mode):
        with mode:
            x = torch.empty(4)
            gathered = torch.empty(8)
        p = _placeholder(g, "primals_1", x)
        t = _placeholder(g, "tangents_1", x)
        ag = _node(g, ops.all_gather_into_tensor.default, (p, 2, "0"), gathered, tag="is_forward")
        if in_forward:
            w = _node(g, ops.wait_tensors.default, ([ag],), [gathered], tag="is_forward")
            w.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
            w.meta["ac_graph_id"] = 1
        sin = _node(g, aten.sin.default, (p,), x, tag="is_forward")
        if not in_forward:
            _node(g, ops.wait_tensors.default, ([ag],), [gathered])
        grad = _node(g, aten.mul.Tensor, (t, sin), x)
        return [sin, grad]

    return _graph(build)


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_wait_tensors_like_wait_tensor(where):
    """2.15's multi-tensor wait_tensors is judged like wait_tensor.
    forward: default_partition does not count it impure (under recompute
    tags an impure value is an error; a dead wait, being no tensor, is
    another). backward: a saved collective whose only backward use is a
    dead wait is pruned from the saved values."""
    joint = _dead_wait_tensors_graph(in_forward=where == "forward")
    sides = Sides(joint, 1, "default", "wait_tensors_like_wait_tensor")
    sides.assert_remat_matches_torch(f"dead wait_tensors in the {where}")
    sides.assert_flip_changes_the_answer(f"dead wait_tensors in the {where}")
    if where == "forward":
        assert "to be a tensor" in str(sides.torch_error), sides.torch_error
    else:
        assert sides.saved(sides.torch) == ["sin_default"], sides.saved(sides.torch)
