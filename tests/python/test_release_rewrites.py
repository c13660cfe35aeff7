"""Parity of the release switches of the graphs remat emits: what the
rewrites (FP8 quantization, activation offloading, control_deps extraction)
build, and what the drop-in stamps on the forward / backward graphs and
the trace, under every supported torch release.

Contract: each test builds a joint graph that exercises its switch, runs the
running release's own partitioner and remat's drop-in on copies of it, and
compares saved values, graphs and the metadata the switch governs (or the
refusal, where remat declines to reproduce a release). Where the releases on
the two sides of the switch differ on that graph, the test also flips the
switch (options "torch_switches") and checks that remat's answer changes, so
a broken switch fails under every release. Nothing torch computes is stored.
"""

from __future__ import annotations

import contextlib
import functools
import json
import operator
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

import torch.fx as fx  # noqa: E402
from torch._functorch import partitioners as tp  # noqa: E402

import parity  # noqa: E402
import remat  # noqa: E402
from corpus import captured_graphs, replay_context  # noqa: E402


def _running() -> tuple[int, int]:
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _fns(partitioner: str):
    if partitioner == "min_cut":
        return tp.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition
    return tp.default_partition, rt.default_partition


def _torch_partition(cap, partitioner: str, **config):
    """The running torch's partition of a fresh copy of cap's joint graph."""
    fn = _fns(partitioner)[0]
    joint = cap.fresh_joint()
    with replay_context(cap, **config), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(joint, cap.joint_inputs, **cap.partition_kwargs())[:2]


def _remat_partition(cap, partitioner: str, switches: dict | None = None, **config):
    """remat's partition of a fresh copy, as the drop-in runs it; with
    `switches`, those release switches flipped on top of the running release."""
    joint = cap.fresh_joint()
    with replay_context(cap, **config), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if switches is None:
            return _fns(partitioner)[1](joint, cap.joint_inputs, **cap.partition_kwargs())[:2]
        options = {**rt.options_from_torch(), "torch_switches": switches}
        p = rt.partition(joint, partitioner=partitioner, options=options, **cap.partition_kwargs())
        return p.forward, p.backward


def _assert_same(expected, actual, cap, label: str) -> None:
    parity.assert_same_partition(expected, actual, cap.num_fwd_outputs, label)


# --- the drop-in's switches follow the partition's options ------------------------------

def test_python_side_switches_follow_the_options_of_the_partition():
    """Within a partition, what the drop-in stamps follows the options the
    engine runs with: their release, then their single-switch overrides."""
    from remat.torch import _release

    running = _running() >= (2, 12)
    assert _release.behaves("output_stack_traces_meta") == running
    with _release.following({"torch_release": "2.11"}):
        assert not _release.behaves("output_stack_traces_meta")
        assert not _release.behaves("static_input_meta")
    with _release.following({"torch_release": "2.15",
                             "torch_switches": {"static_input_meta": False}}):
        assert _release.behaves("output_stack_traces_meta")
        assert not _release.behaves("static_input_meta")
        with pytest.raises(KeyError):
            _release.behaves("no_such_switch")
    assert _release.behaves("output_stack_traces_meta") == running


# --- output_stack_traces_meta (2.12) ---------------------------------------------------

def _output_meta(modules) -> list:
    """Per graph, the output node's meta keys and its output_stack_traces."""
    out = []
    for gm in modules:
        meta = parity.output_node(gm).meta
        out.append((sorted(k for k in meta if k != "val"), meta.get("output_stack_traces")))
    return out


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_output_stack_traces_meta(partitioner):
    """From 2.12 the output node of the forward and the backward carries
    meta["output_stack_traces"] (each output value's stack trace); 2.11 sets
    only "desc". A Python-side switch: the drop-in stamps it on import."""
    cap = _captured("sin_of_matmul")  # a user module: its nodes keep their stack traces
    expected = _torch_partition(cap, partitioner)
    actual = _remat_partition(cap, partitioner)
    _assert_same(expected, actual, cap, partitioner)
    assert _output_meta(actual) == _output_meta(expected)

    stamped = _running() >= (2, 12)
    assert all(("output_stack_traces" in keys) == stamped for keys, _ in _output_meta(expected))
    if stamped:  # the graph has traces to stamp: the switch is exercised
        assert any(t is not None for t in _output_meta(expected)[0][1])
    flipped = _remat_partition(cap, partitioner, {"output_stack_traces_meta": not stamped})
    _assert_same(expected, flipped, cap, f"{partitioner}, switch flipped")
    assert all(("output_stack_traces" in keys) != stamped for keys, _ in _output_meta(flipped))


# --- models captured live for these tests ----------------------------------------------

class _ReturnsWhatItSaves(torch.nn.Module):
    """y = x @ w is returned and saved (sin's backward needs it): a value
    that is both a user output and a saved value."""

    def __init__(self, dtype=torch.bfloat16):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8, dtype=dtype))

    def forward(self, x):
        y = x @ self.w
        return y, torch.sin(y)


class _ReturnsOnlyTheEnd(_ReturnsWhatItSaves):
    """The same, returning only sin(y): y is saved but no user output."""

    def forward(self, x):
        return torch.sin(x @ self.w)


_MODELS = {
    "returns_what_it_saves": (_ReturnsWhatItSaves, torch.bfloat16),
    "returns_only_the_end": (_ReturnsOnlyTheEnd, torch.bfloat16),
    "sin_of_matmul": (lambda: _ReturnsOnlyTheEnd(torch.float32), torch.float32),
}


@functools.cache
def _captured(name: str):
    """The one joint graph torch.compile hands the partitioner for a model
    of _MODELS (fed a (4, 8) input)."""
    from corpus import Case, capture_case

    make, dtype = _MODELS[name]
    torch.manual_seed(0)
    case = Case(name, make, lambda: (torch.randn(4, 8, dtype=dtype, requires_grad=True),))
    (cap,) = capture_case(case)
    return cap


# --- quantize_skips_user_outputs (2.12) ------------------------------------------------

_QUANTIZE = {"size_in_mb": 0, "allowed_dtypes": "torch.bfloat16"}


@contextlib.contextmanager
def _quantizing(config=None):
    import torch._inductor.config as inductor_config

    options = {"activation_quantization_aten_pass": config or _QUANTIZE}
    with inductor_config.patch(post_grad_fusion_options=options):
        yield


def _quantized_positions(fw, num_fwd_outputs: int) -> list[int]:
    return [i for i, v in enumerate(parity.output_values(fw))
            if isinstance(v, fx.Node) and v.name.startswith("fp8_quant_pos_")]


@pytest.mark.filterwarnings("ignore:erase_node")  # torch 2.11's own, on the graph it breaks
@pytest.mark.parametrize("use_scaling", [True, False])
def test_quantize_skips_user_outputs(use_scaling):
    """2.12 on, FP8 activation quantization walks only the saved positions of
    the forward's outputs; 2.11 also quantizes a user output that is saved
    too, returning fp8 to the user and building a backward that fails at run
    time. remat refuses that graph under 2.11 (the drop-in falls back to
    torch's), and otherwise matches every release."""
    config = {**_QUANTIZE, "use_scaling": use_scaling}
    cap = _captured("returns_what_it_saves")
    skips = _running() >= (2, 12)
    with _quantizing(config):
        expected = _torch_partition(cap, "min_cut")
        # The graph exercises the switch: user output 0 is also quantized as
        # a saved value, and torch quantizes its user position only in 2.11.
        names = [v.name for v in parity.output_values(expected[0])]
        base = names[0].removeprefix("fp8_quant_pos_0_")
        assert any(n.startswith("fp8_quant_pos_") and n.endswith(f"_{base}") for n in names[1:]), names
        assert names[0].startswith("fp8_quant_pos_0_") != skips, names
        quantized = _quantized_positions(expected[0], cap.num_fwd_outputs)
        if skips:
            _assert_same(expected, _remat_partition(cap, "min_cut"), cap, "min_cut")
            with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11.*user output 0"):
                _remat_partition(cap, "min_cut", {"quantize_skips_user_outputs": False})
        else:
            with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11.*user output 0"):
                _remat_partition(cap, "min_cut")
            # install()'s fallback hands the graph to torch: 2.11's own graphs.
            fallback = rt._dropin._with_fallback(rt.min_cut_rematerialization_partition,
                                                 tp.min_cut_rematerialization_partition)
            with replay_context(cap), pytest.warns(UserWarning, match="falling back"):
                got = fallback(cap.fresh_joint(), cap.joint_inputs, **cap.partition_kwargs())
            _assert_same(expected, got, cap, "fallback")
            flipped = _remat_partition(cap, "min_cut", {"quantize_skips_user_outputs": True})
            assert _quantized_positions(flipped[0], cap.num_fwd_outputs) != quantized


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_quantize_skips_user_outputs_changes_nothing_without_an_overlap(partitioner):
    """A saved value that is no user output is quantized alike by every
    release: starting 2.11's walk at position 0 finds nothing more."""
    cap = _captured("returns_only_the_end")
    with _quantizing():
        expected = _torch_partition(cap, partitioner)
        assert _quantized_positions(expected[0], cap.num_fwd_outputs)
        _assert_same(expected, _remat_partition(cap, partitioner), cap, partitioner)
        flipped = _remat_partition(cap, partitioner,
                                   {"quantize_skips_user_outputs": _running() < (2, 12)})
        _assert_same(expected, flipped, cap, f"{partitioner}, switch flipped")


# --- activation offloading: offload_async_ops (2.12), offload_reload_layout (2.13) ------

_OFFLOAD_DATA = Path(__file__).resolve().parent.parent / "data" / "offload"
_OFFLOAD_KEYS = ("saved_for_offloading", "original_device", "original_size", "original_stride")
_SEPARATE_STREAM = {"activation_offload_separate_stream": True}


def _offload_doc() -> dict:
    """A joint graph with fake CUDA values whose nodes a joint pass marked
    should_offload (tests/data/offload; see test_offload_parity.py)."""
    return json.loads((_OFFLOAD_DATA / "mlp_all.json").read_text())


def _offload_run(fn, doc: dict, config: dict, switches: dict | None = None):
    """fn's (forward, backward) on the imported joint graph with offloading on;
    `switches` runs remat's partition with those release switches flipped."""
    import torch._functorch.config as functorch_config

    gm = rt.import_graph(doc)
    mode = next(n.meta["val"].fake_mode for n in gm.graph.nodes
                if isinstance(n.meta.get("val"), torch.Tensor))
    kwargs = {"num_fwd_outputs": doc["num_fwd_outputs"],
              "static_lifetime_input_indices": doc["static_lifetime_input_indices"]}
    with functorch_config.patch({"enable_activation_offloading": True, **config}), \
            torch.no_grad(), mode, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if switches is None:
            return fn(gm, None, **kwargs)[:2]
        options = {**rt.options_from_torch(), "torch_switches": switches}
        p = rt.partition(gm, options=options, **kwargs)
        return p.forward, p.backward


def _engine_offload(doc: dict, config: dict, switches: dict) -> dict:
    """The engine's result document for the joint graph (no FX import: ops a
    release lacks, such as 2.11's missing ao::, need not resolve)."""
    options = {"torch_release": f"{_running()[0]}.{_running()[1]}", "enable_activation_offloading": True,
               **config, "torch_switches": switches}
    return remat.partition(json.dumps(doc), options, as_json=False)


def _offload_meta(modules) -> list:
    """The offloading meta keys of every node that has one, per graph."""
    out = []
    for gm in modules:
        out.append({n.name: {k: repr(n.meta[k]) for k in _OFFLOAD_KEYS if k in n.meta}
                    for n in gm.graph.nodes if any(k in n.meta for k in _OFFLOAD_KEYS)})
    return out


def _offload_ops(modules) -> list[str]:
    return [parity.target_key(n.target) for gm in modules for n in gm.graph.nodes
            if parity.target_key(n.target).startswith(("op:ao.", "op:prims.device_put", "op:streams."))]


def _doc_targets(result: dict) -> list[str]:
    return [nd.get("target", "") for side in ("forward", "backward") for nd in result[side]["nodes"]]


def test_offload_async_ops():
    """2.12 on, the separate stream emits ao.offload / ao.reload /
    ao.wait_tensor, as remat does; 2.11 brackets device_put with streams.*
    ops numbered from dynamo's global registry, which remat refuses (the
    drop-in falls back to torch). The synchronous path is every release's."""
    doc = _offload_doc()
    sync_expected = _offload_run(tp.min_cut_rematerialization_partition, doc, {})
    sync_actual = _offload_run(rt.min_cut_rematerialization_partition, doc, {})
    assert "op:prims.device_put.default" in _offload_ops(sync_expected)
    parity.assert_same_partition(sync_expected, sync_actual, doc["num_fwd_outputs"], "synchronous")
    assert _offload_meta(sync_actual) == _offload_meta(sync_expected)

    async_ops = _running() >= (2, 12)
    if async_ops:
        expected = _offload_run(tp.min_cut_rematerialization_partition, doc, _SEPARATE_STREAM)
        actual = _offload_run(rt.min_cut_rematerialization_partition, doc, _SEPARATE_STREAM)
        assert "op:ao.offload.default" in _offload_ops(expected)
        parity.assert_same_partition(expected, actual, doc["num_fwd_outputs"], "separate stream")
        assert _offload_meta(actual) == _offload_meta(expected)
        with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11.*registry"):
            _offload_run(None, doc, _SEPARATE_STREAM, {"offload_async_ops": False})
    else:
        with pytest.raises(remat.UnsupportedError, match=r"torch 2\.11.*registry"):
            _offload_run(rt.min_cut_rematerialization_partition, doc, _SEPARATE_STREAM)
        flipped = _engine_offload(doc, _SEPARATE_STREAM, {"offload_async_ops": True})
        assert "ao.offload.default" in _doc_targets(flipped)


def test_offload_reload_layout():
    """2.13 on, an async reload passes the original size and stride and its
    wait keeps the CPU copy alive, and the backward placeholder's meta holds
    original_size / original_stride; before, reload(p, device),
    wait_tensor(reload), and the offloaded forward node records
    original_device instead (the synchronous path shows the meta alone)."""
    doc = _offload_doc()
    layout = _running() >= (2, 13)
    for config in ({}, _SEPARATE_STREAM):
        if config and _running() < (2, 12):
            continue  # 2.11's separate stream is refused (test_offload_async_ops)
        expected = _offload_run(tp.min_cut_rematerialization_partition, doc, config)
        actual = _offload_run(rt.min_cut_rematerialization_partition, doc, config)
        label = f"offloading {config}"
        parity.assert_same_partition(expected, actual, doc["num_fwd_outputs"], label)
        assert _offload_meta(actual) == _offload_meta(expected), label
        sizes = [m for graph in _offload_meta(expected) for m in graph.values() if "original_size" in m]
        assert bool(sizes) == layout, label
        flipped = _offload_run(None, doc, config, {"offload_reload_layout": not layout})
        assert _offload_meta(flipped) != _offload_meta(expected), label
        if config:
            reload = [n for n in expected[1].graph.nodes
                      if parity.target_key(n.target) == "op:ao.reload.default"]
            assert reload and len(reload[0].args) == (4 if layout else 2), label
            assert parity.graph_diff(expected[1], flipped[1], "backward") is not None, label


# --- mark_autograd_backward_meta (2.13) ------------------------------------------------

def _backward_marks(bw) -> dict:
    return {n.name: n.meta.get("autograd_backward") for n in bw.graph.nodes
            if n.op in ("call_function", "get_attr")}


def test_mark_autograd_backward_meta():
    """2.13 on, extraction marks every backward call_function / get_attr node
    taken from the joint graph meta["autograd_backward"], recomputed forward
    nodes included; before, a backward node carries what its joint node did
    (2.12's tracer marks the nodes traced in the backward, 2.11's none)."""
    (cap,) = captured_graphs("mlp_gelu_d3")
    expected = _torch_partition(cap, "min_cut")
    actual = _remat_partition(cap, "min_cut")
    _assert_same(expected, actual, cap, "min_cut")
    assert _backward_marks(actual[1]) == _backward_marks(expected[1])
    # The graph exercises the switch: the backward recomputes forward nodes,
    # which only the 2.13 rule marks.
    joint = {n.name: n for n in cap.joint_module.graph.nodes}
    recomputed = [name for name in _backward_marks(expected[1])
                  if name in joint and not joint[name].meta.get("autograd_backward")]
    assert recomputed, "the min-cut recomputes nothing in the backward"
    marks = _running() >= (2, 13)
    assert all(_backward_marks(expected[1])[name] == (True if marks else None) for name in recomputed)
    flipped = _remat_partition(cap, "min_cut", {"mark_autograd_backward_meta": not marks})
    _assert_same(expected, flipped, cap, "min_cut, switch flipped")
    assert _backward_marks(flipped[1]) != _backward_marks(expected[1])


# --- min_cut_information_payload (2.13) ------------------------------------------------

@pytest.fixture
def min_cut_information(monkeypatch):
    """The min_cut_information artifacts (payloads, in order) torch's
    partitioner and remat's emit under AOT_PARTITIONER_DEBUG."""
    import logging

    from torch._logging._internal import trace_log

    class Handler(logging.Handler):
        def __init__(self):
            super().__init__(level=logging.DEBUG)
            self.payloads: list[str] = []

        def emit(self, record):
            meta = getattr(record, "metadata", {})
            if meta.get("artifact", {}).get("name") == "min_cut_information":
                self.payloads.append(record.payload)

    monkeypatch.setattr(tp, "AOT_PARTITIONER_DEBUG", True)
    handler = Handler()
    old_level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield handler.payloads
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(old_level)


def test_min_cut_information_payload(min_cut_information):
    """2.13 on, the min_cut_information artifact adds the memory budget and
    the min-cut tiers' activation sizes (17 keys), and the JSON is kept on
    the joint graph (_min_cut_info_str) for AOTAutograd's cache; 2.11 and
    2.12 emit eleven keys and keep nothing."""
    (cap,) = captured_graphs("mlp_gelu_d3")[:1]
    seen = {}
    for who, switches in (("torch", None), ("remat", None), ("flipped", "flip")):
        min_cut_information.clear()
        joint = cap.fresh_joint()
        with replay_context(cap, activation_memory_budget=0.1), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if who == "torch":
                tp.min_cut_rematerialization_partition(joint, cap.joint_inputs, **cap.partition_kwargs())
            elif who == "remat":
                rt.min_cut_rematerialization_partition(joint, cap.joint_inputs, **cap.partition_kwargs())
            else:
                options = {**rt.options_from_torch(),
                           "torch_switches": {"min_cut_information_payload": _running() < (2, 13)}}
                rt.partition(joint, options=options, **cap.partition_kwargs())
        seen[who] = ([json.loads(p) for p in min_cut_information],
                     getattr(joint.graph, "_min_cut_info_str", None))
    payloads, kept = seen["torch"]
    assert payloads, "the budget must reach torch's knapsack for this test to mean anything"
    assert seen["remat"][0] == payloads
    assert (seen["remat"][1] is None) == (kept is None)
    if kept is not None:
        assert json.loads(seen["remat"][1]) == json.loads(kept)
    extended = _running() >= (2, 13)
    assert all(("Memory Budget" in p) == extended for p in payloads)
    assert (kept is not None) == extended
    assert [sorted(p) for p in seen["flipped"][0]] != [sorted(p) for p in payloads]
    assert (seen["flipped"][1] is not None) != extended


# --- static_input_meta (2.15) ----------------------------------------------------------

def _static_marks(modules) -> list[dict]:
    return [{n.name: n.meta.get("is_static_input", "absent") for n in gm.graph.find_nodes(op="placeholder")}
            for gm in modules]


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
def test_static_input_meta(partitioner):
    """2.15 on, extraction stamps meta["is_static_input"] on every primal
    placeholder of the joint graph (whether it is a static-lifetime input),
    which the forward's and backward's placeholders share; 2.14 and before
    stamp nothing. The drop-in stamps after a successful partition."""
    (cap,) = captured_graphs("mlp_relu_d2")
    static = cap.static_lifetime_input_indices or []
    assert static, "the parameters must be static-lifetime inputs for this test"
    expected = _torch_partition(cap, partitioner)
    actual = _remat_partition(cap, partitioner)
    _assert_same(expected, actual, cap, partitioner)
    assert _static_marks(actual) == _static_marks(expected)
    stamps = _running() >= (2, 15)
    forward = _static_marks(expected)[0]
    assert (set(forward.values()) == {True, False}) == stamps, forward
    assert ("absent" in forward.values()) != stamps, forward
    flipped = _remat_partition(cap, partitioner, {"static_input_meta": not stamps})
    _assert_same(expected, flipped, cap, f"{partitioner}, switch flipped")
    assert _static_marks(flipped) != _static_marks(expected)


# --- control_deps_extraction (2.14) ----------------------------------------------------

def _sync_module(values) -> fx.GraphModule:
    """A control_deps body that records a stream event and passes its
    dependencies through, as AOTAutograd wraps a stream sync."""
    g = fx.Graph()
    deps = [g.placeholder(f"dep_{i}") for i in range(len(values))]
    for d, v in zip(deps, values):
        d.meta["val"] = v
    event = g.call_function(torch.ops.streams.record_event.default, (0, 0))
    event.meta["val"] = None
    g.output((event, *deps))
    return fx.GraphModule(torch.nn.Module(), g)


def _insert_sync(joint: fx.GraphModule, after: fx.Node, deps: list, tag=None, additional=()):
    """control_deps(additional, subgraph, *deps) after `after`, and its
    getitems, one per dependency. A `tag` goes on the control_deps; its
    getitems are then tagged is_backward."""
    from torch._inductor.fx_passes.control_dependencies import control_deps

    g = joint.graph
    name = f"subgraph_record_event_{sum(1 for n in g.nodes if n.op == 'get_attr')}"
    setattr(joint, name, _sync_module([d.meta["val"] for d in deps]))
    with g.inserting_after(after):
        body = g.get_attr(name)
    with g.inserting_after(body):
        cd = g.call_function(control_deps, (tuple(additional), body, *deps))
    cd.meta["val"] = (None, *[d.meta["val"] for d in deps])
    items, prev = [], cd
    for i, d in enumerate(deps):
        with g.inserting_after(prev):
            prev = g.call_function(operator.getitem, (cd, i + 1))
        prev.meta["val"] = d.meta["val"]
        items.append(prev)
    if tag:
        cd.meta["partitioner_tag"] = tag
        for n in items:
            n.meta["partitioner_tag"] = "is_backward"
    return cd, items


def _forward_sync(joint: fx.GraphModule) -> None:
    """A forward sync passing primals_1 to sin; cos (backward) reads it too."""
    nodes = {n.name: n for n in joint.graph.nodes}
    x = nodes["primals_1"]
    _, (through,) = _insert_sync(joint, x, [x], additional=(x,))
    nodes["sin"].replace_input_with(x, through)


def _backward_sync(joint: fx.GraphModule, tag: str) -> None:
    """A backward sync passing sin (forward) and mul (backward) on; the
    backward reads both through it."""
    g = joint.graph
    nodes = {n.name: n for n in g.nodes}
    sin, mul = nodes["sin"], nodes["mul"]
    users = list(mul.users)
    _, (of_sin, of_mul) = _insert_sync(joint, mul, [sin, mul], tag=tag, additional=(mul,))
    for u in users:
        u.replace_input_with(mul, of_mul)
    with g.inserting_after(of_mul):
        zero = g.call_function(torch.ops.aten.mul.Tensor, (of_sin, 0.0))
    out = g.output_node()
    grad = out.args[0][-1]
    with g.inserting_before(out):
        total = g.call_function(torch.ops.aten.add.Tensor, (grad, zero))
    for n in (zero, total):
        n.meta["val"] = grad.meta["val"]
        n.meta["partitioner_tag"] = "is_backward"
    out.args = ((*out.args[0][:-1], total),)


_SYNC_EDITS = {
    "forward_sync": _forward_sync,
    "backward_sync_must_be_in_backward": lambda j: _backward_sync(j, "must_be_in_backward"),
    "backward_sync_passing_forward_values": lambda j: _backward_sync(j, "is_backward"),
}


@functools.cache
def _sin_joint():
    """The joint graph of x.sin() (sin in the forward, cos * tangent in the
    backward), as aot_function hands it to the partitioner."""
    from torch._functorch.aot_autograd import aot_function

    seen = {}

    def record(joint, joint_inputs, **kwargs):
        from corpus.capture import copy_graph_module

        seen.update(joint=copy_graph_module(joint), inputs=joint_inputs, kwargs=kwargs)
        return tp.default_partition(joint, joint_inputs, **kwargs)

    fn = aot_function(lambda x: (x.sin(),), fw_compiler=lambda g, _: g, bw_compiler=lambda g, _: g,
                      partition_fn=record)
    fn(torch.randn(8, requires_grad=True))
    return seen


def _synced_joint(case: str) -> tuple[fx.GraphModule, dict]:
    from corpus.capture import copy_graph_module

    import torch._dynamo.variables.streams  # noqa: F401  (registers torch.ops.streams)

    seen = _sin_joint()
    joint = copy_graph_module(seen["joint"])
    _SYNC_EDITS[case](joint)
    joint.graph.lint()
    joint.recompile()
    return joint, seen["kwargs"]


def _partition_synced(fn, case: str):
    """fn's result on a fresh copy of the case's joint graph, and the joint
    module's attributes after it (torch 2.14 installs rebuilt subgraphs)."""
    joint, kwargs = _synced_joint(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(joint, None, **kwargs)
    return out, sorted(joint._modules)


def _remat_synced(case: str, partitioner: str, switches: dict):
    joint, kwargs = _synced_joint(case)
    options = {**rt.options_from_torch(), "torch_switches": switches}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = rt.partition(joint, partitioner=partitioner, options=options, **kwargs)
    return p.forward, p.backward


def _classified(case: str) -> tuple[list, list]:
    """torch's own classification of the case's joint graph (required
    forward, required backward), on a copy."""
    joint, kwargs = _synced_joint(case)
    info = tp.classify_nodes(joint, [], kwargs["num_fwd_outputs"])
    return [n.name for n in info.required_fw_nodes], [n.name for n in info.required_bw_nodes]


@pytest.mark.parametrize("partitioner", ["min_cut", "default"])
@pytest.mark.parametrize("case", sorted(_SYNC_EDITS))
def test_control_deps_extraction(case, partitioner):
    """torch 2.14's control_deps rules, on hand-built stream syncs (real ones
    need a CUDA stream program):
      * a forward sync (its subgraph records an event; no backward tag)
        leaves the backward, its getitems reading the dependencies (entry 9:
        default_partition shows it, the min-cut's reordering drops it anyway);
      * required_bw passes from a backward control_deps only to getitems of
        required dependencies (entry 11: classification; the graphs agree);
      * a control_deps whose dependencies are only partly available in an
        extracted graph is rebuilt on a new subgraph module (entry 10),
        which remat refuses under 2.14 on (the drop-in falls back to torch).
    Before 2.14 a control_deps call is an ordinary side-effectful node."""
    torch_fn, remat_fn = _fns(partitioner)
    rules = _running() >= (2, 14)
    (expected, torch_attrs) = _partition_synced(torch_fn, case)
    rebuilt = any(a.startswith("subgraph_cd_extract") for a in torch_attrs)
    assert rebuilt == (rules and case == "backward_sync_passing_forward_values"), torch_attrs
    if rebuilt:
        with pytest.raises(remat.UnsupportedError, match=r"torch 2\.14.*rebuilds this control_deps"):
            _partition_synced(remat_fn, case)
        flipped = _remat_synced(case, partitioner, {"control_deps_extraction": False})
        assert parity.partition_diffs(expected, flipped, 1), "the flipped switch gives torch 2.14's graphs"
        return
    (actual, remat_attrs) = _partition_synced(remat_fn, case)
    parity.assert_same_partition(expected, actual, 1, f"{case}/{partitioner}")
    assert remat_attrs == torch_attrs

    other = {"control_deps_extraction": not rules}
    if case == "forward_sync" and partitioner == "default":
        # The sync runs in the backward only before 2.14, where DCE keeps it
        # (control_deps is side-effectful from 2.12 on; 2.11 drops it anyway).
        joint, _ = _synced_joint(case)
        kept = next(n for n in joint.graph.nodes if n.name == "control_deps").is_impure()
        in_backward = any(n.name == "control_deps" for n in expected[1].graph.nodes)
        assert in_backward == (kept and not rules)
        if kept:
            flipped = _remat_synced(case, partitioner, other)
            assert parity.partition_diffs(expected, flipped, 1)
    elif case == "backward_sync_must_be_in_backward":
        # torch 2.14 no longer marks getitem(cd, 1) (of sin) required_bw.
        _, required_bw = _classified(case)
        assert ("getitem" in required_bw) != rules, required_bw
    elif case == "backward_sync_passing_forward_values":
        # Before 2.14 nothing is rebuilt; flipped on, remat refuses.
        with pytest.raises(remat.UnsupportedError, match="rebuilds this control_deps"):
            _remat_synced(case, partitioner, other)
