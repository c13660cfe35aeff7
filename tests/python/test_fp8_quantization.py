"""FP8 activation quantization: remat's partitions under inductor's
post_grad_fusion_options["activation_quantization_aten_pass"] are torch
2.13's, computed live on the same captured joint graphs.

Per case, torch's and remat's partitioner run on fresh copies under the same
config (the pass's dict, a memory budget where given) and must agree on:

* the saved values and the forward / backward graphs, node for node;
* the value metadata of every node (dtype, shape, strides of meta["val"],
  tensor_meta) and the meta keys torch's pass leaves (saved_for_quantization,
  dequant_type, autograd_backward);
* the forward output's "desc" and the marks on the joint graph;
* torch's counters (inductor activation_quantization_{fwd,bwd}_aten_pass);
* the structured-trace artifacts {before,after}_activation_quantization_
  {fwd,bwd}_aten_pass, payloads byte for byte;
* the debug line torch logs for a static-lifetime input it skips;
* symbolic sizes: the guards torch's size test records in the ShapeEnv, and
  the skip_dynamo_guards / quantize_dynamic_shape choices.

Nothing torch computes is stored here.
"""

from __future__ import annotations

import logging
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch._inductor.config as inductor_config  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402
from torch._functorch import partitioners as tp  # noqa: E402

import parity  # noqa: E402
import remat  # noqa: E402
from corpus import captured_graphs, run_partition  # noqa: E402

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

F32 = "torch.float32"
COUNTER_KEYS = ("activation_quantization_fwd_aten_pass", "activation_quantization_bwd_aten_pass")

# (case, partitioner, quantization dict, functorch config): every option
# torch reads, both partitioners, memory budgets, static and symbolic shapes.
CASES = {
    # torch's defaults (bfloat16 only, scale in the forward, plain dequant).
    "bf16_defaults": ("mlp_bf16", "min_cut", {"size_in_mb": 0}, {}),
    "bf16_default_partitioner_e4m3": (
        "mlp_bf16", "default",
        {"size_in_mb": 0, "quant_type": "torch.float8_e4m3fn", "allowed_dtypes": "torch.float32;torch.bfloat16"},
        {}),
    "f32_scaling_both_ways": ("mlp_gelu_d3", "min_cut", {"size_in_mb": 0, "allowed_dtypes": F32, "use_scaling": True}, {}),
    "f32_default_partitioner_no_scaling": (
        "mlp_gelu_d3", "default", {"size_in_mb": 0, "allowed_dtypes": F32, "use_scaling": False}, {}),
    # A threshold between the sizes: only the larger saved values qualify.
    "f32_size_threshold": ("transformer_block", "min_cut", {"size_in_mb": 0.0005, "allowed_dtypes": F32}, {}),
    "transformer_budget_exclude_primals": (
        "transformer_block", "min_cut",
        {"size_in_mb": 0, "allowed_dtypes": F32, "exclude_primals": True, "use_scaling": True},
        {"activation_memory_budget": 0.3}),
    "cnn_budget_half_e5m2fnuz": (
        "cnn_bn_maxpool", "min_cut",
        {"size_in_mb": 0, "allowed_dtypes": "torch.float", "quant_type": "float8_e5m2fnuz"},
        {"activation_memory_budget": 0.5}),
    "checkpointed_region": ("checkpoint_mlp", "min_cut", {"size_in_mb": 0, "allowed_dtypes": F32}, {}),
    "dynamic_guarded": ("dynamic_mlp", "min_cut", {"size_in_mb": 0.0001, "allowed_dtypes": F32}, {}),
    "dynamic_static_only": (
        "dynamic_mlp", "min_cut",
        {"size_in_mb": 0.0001, "allowed_dtypes": F32, "skip_dynamo_guards": True}, {}),
    "dynamic_unless_provably_small": (
        "dynamic_mlp", "default",
        {"size_in_mb": 0.0001, "allowed_dtypes": F32, "skip_dynamo_guards": True,
         "quantize_dynamic_shape": True, "use_scaling": True}, {}),
    "nothing_qualifies": ("mlp_gelu_d3", "min_cut", {"size_in_mb": 0}, {}),  # no bfloat16 here
}


def _fns(partitioner):
    if partitioner == "min_cut":
        return tp.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition
    return tp.default_partition, rt.default_partition


def _run(fn, cap, quantization, config, **kwargs):
    """(fw, bw), the counters it bumped, the joint's marks and the guards it added."""
    counters.clear()
    shape_env = getattr(cap.fake_mode, "shape_env", None)
    guards_before = len(shape_env.guards) if shape_env is not None else 0
    joint = cap.fresh_joint()
    opts = {"activation_quantization_aten_pass": quantization}
    with inductor_config.patch(post_grad_fusion_options=opts), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from corpus import replay_context

        with replay_context(cap, **config):
            part_kwargs = {**cap.partition_kwargs(), **kwargs}
            out = fn(joint, cap.joint_inputs, **part_kwargs)
    bumped = {k: counters["inductor"][k] for k in COUNTER_KEYS if counters["inductor"][k]}
    marks = {n.name: (n.meta.get("saved_for_quantization"), n.meta.get("dequant_type"))
             for n in joint.graph.nodes if "saved_for_quantization" in n.meta}
    guards = [str(g.expr) for g in shape_env.guards[guards_before:]] if shape_env is not None else []
    return out[:2], bumped, marks, guards


def _value(v):
    if isinstance(v, torch.Tensor):
        return (str(v.dtype), tuple(str(s) for s in v.shape), tuple(str(s) for s in v.stride()),
                str(v.device))
    return repr(v) if isinstance(v, (int, float, bool, type(None))) else type(v).__name__


def meta_diffs(expected, actual) -> list[str]:
    """What differs in the meta torch's pass and extraction leave."""
    out = []
    for side, ge, ga in (("forward", expected[0], actual[0]), ("backward", expected[1], actual[1])):
        for ne, na in zip(ge.graph.nodes, ga.graph.nodes):
            for key in ("saved_for_quantization", "dequant_type", "autograd_backward"):
                if ne.meta.get(key) != na.meta.get(key):
                    out.append(f"{side} {ne.name}: meta[{key!r}] torch {ne.meta.get(key)!r}, "
                               f"remat {na.meta.get(key)!r}")
            if _value(ne.meta.get("val")) != _value(na.meta.get("val")):
                out.append(f"{side} {ne.name}: val torch {_value(ne.meta.get('val'))}, "
                           f"remat {_value(na.meta.get('val'))}")
            te, ta = ne.meta.get("tensor_meta"), na.meta.get("tensor_meta")
            if (te is None) != (ta is None) or (te is not None and (te.dtype, te.shape, te.stride) !=
                                                (ta.dtype, ta.shape, ta.stride)):
                out.append(f"{side} {ne.name}: tensor_meta torch {te}, remat {ta}")
        oe, oa = parity.output_node(ge), parity.output_node(ga)
        if repr(oe.meta.get("desc")) != repr(oa.meta.get("desc")):
            out.append(f"{side} output desc: torch {oe.meta.get('desc')}, remat {oa.meta.get('desc')}")
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_quantized_partition_matches_torch(name):
    case, partitioner, quantization, config = CASES[name]
    torch_fn, remat_fn = _fns(partitioner)
    for cap in captured_graphs(case):
        expected, torch_counts, torch_marks, torch_guards = _run(torch_fn, cap, quantization, config)
        actual, remat_counts, remat_marks, remat_guards = _run(remat_fn, cap, quantization, config)
        problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
        problems += meta_diffs(expected, actual)
        problems += parity.partition_meta_diffs(expected, actual) if not problems else []
        assert not problems, f"{name} {cap.label}:\n" + "\n\n".join(problems)
        assert remat_counts == torch_counts
        assert remat_marks == torch_marks
        quantized = any(n.name.startswith("fp8_quant_") for n in expected[0].graph.nodes)
        assert quantized == (name != "nothing_qualifies"), "the case no longer tests what it says"


@pytest.mark.parametrize("name", ["dynamic_guarded", "dynamic_static_only"])
def test_symbolic_sizes_record_torchs_guards(name):
    """torch's size test on a symbolic size records a guard in the compile's
    ShapeEnv (none with skip_dynamo_guards); remat's must record the same.
    Each partitioner gets its own fresh compile: a guard already recorded
    would make the second one's test static."""
    from corpus import CASES_BY_NAME, capture_case

    case, partitioner, quantization, config = CASES[name]
    torch_fn, remat_fn = _fns(partitioner)
    guards = []
    for fn in (torch_fn, remat_fn):
        (cap,) = capture_case(CASES_BY_NAME[case])
        guards.append(_run(fn, cap, quantization, config)[3])
    assert guards[1] == guards[0]
    assert bool(guards[0]) == (name == "dynamic_guarded"), guards[0]


def test_cases_cover_every_option_torch_reads():
    """Each key torch's pass reads (read from the installed source) is set by a case."""
    import inspect
    import re

    source = "".join(inspect.getsource(f) for f in (
        tp.should_quantize, tp.get_allowed_dtypes, tp.get_quant_type, tp.quantize_activation_fw,
        tp.quantize_activation_bw, tp.perform_fp8_activation_quantization,
        tp.enable_activation_quantization))
    keys = set(re.findall(r'\]\s*\.get\(\s*"(\w+)"', source))
    assert keys >= {"size_in_mb", "use_scaling", "quant_type", "allowed_dtypes"}
    covered = set().union(*(q.keys() for _, _, q, _ in CASES.values()))
    assert keys <= covered, f"options torch reads that no case sets: {keys - covered}"
    assert {"use_scaling"} <= {k for _, _, q, _ in CASES.values() for k, v in q.items() if v is False}


@pytest.fixture
def artifacts():
    """Structured-trace artifacts (name, payload), in order, while a handler listens."""
    from torch._logging._internal import trace_log

    class Handler(logging.Handler):
        def __init__(self):
            super().__init__(level=logging.DEBUG)
            self.items: list[tuple[str, str]] = []

        def emit(self, record):
            meta = getattr(record, "metadata", {})
            if "artifact" in meta and "activation_quantization" in meta["artifact"]["name"]:
                self.items.append((meta["artifact"]["name"], record.payload))

    handler = Handler()
    old_level = trace_log.level
    trace_log.setLevel(logging.DEBUG)
    trace_log.addHandler(handler)
    try:
        yield handler.items
    finally:
        trace_log.removeHandler(handler)
        trace_log.setLevel(old_level)


@pytest.mark.parametrize("name", ["f32_scaling_both_ways", "bf16_defaults", "dynamic_guarded",
                                  "f32_default_partitioner_no_scaling"])
def test_trace_artifacts_match_torch(name, artifacts):
    case, partitioner, quantization, config = CASES[name]
    torch_fn, remat_fn = _fns(partitioner)
    (cap,) = captured_graphs(case)
    _run(torch_fn, cap, quantization, config)
    theirs = list(artifacts)
    artifacts.clear()
    _run(remat_fn, cap, quantization, config)
    assert [n for n, _ in theirs] == [
        "before_activation_quantization_fwd_aten_pass", "after_activation_quantization_fwd_aten_pass",
        "before_activation_quantization_bwd_aten_pass", "after_activation_quantization_bwd_aten_pass"]
    assert [n for n, _ in artifacts] == [n for n, _ in theirs]
    for (n, mine), (_, torchs) in zip(artifacts, theirs):
        assert mine == torchs, f"{n} payload differs:\n--- torch\n{torchs}\n--- remat\n{mine}"


def test_no_artifacts_and_no_counters_when_nothing_qualifies(artifacts):
    case, partitioner, quantization, config = CASES["nothing_qualifies"]
    (cap,) = captured_graphs(case)
    _, counts, marks, _ = _run(rt.min_cut_rematerialization_partition, cap, quantization, config)
    assert counts == {} and marks == {} and artifacts == []


def test_skipped_static_inputs_are_logged_as_torch_logs_them(monkeypatch):
    """A static-lifetime input is never quantized; torch logs a debug line for it."""
    (cap,) = captured_graphs("mlp_gelu_d3")
    logger = logging.getLogger("torch._functorch.partitioners")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    monkeypatch.setattr(logger, "propagate", False)

    class Records(logging.Handler):
        def __init__(self):
            super().__init__(level=logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    quantization = {"size_in_mb": 0, "allowed_dtypes": F32}
    results = []
    try:
        for fn in (tp.min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition):
            handler = Records()
            logger.addHandler(handler)
            try:
                out = _run(fn, cap, quantization, {}, static_lifetime_input_indices=[0, 2])
            finally:
                logger.removeHandler(handler)
            results.append((out, [s for s in handler.lines if "quantization" in s]))
    finally:
        logger.setLevel(old)
    (expected, *_), torch_lines = results[0]
    (actual, *_), remat_lines = results[1]
    assert not parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
    assert torch_lines and remat_lines == torch_lines


def test_engine_options_reject_what_torch_cannot_resolve():
    """The C++ API and CLI name the key; from remat.torch, torch's unknown
    keys are ignored (torch never reads them), its dtype errors are errors."""
    doc = open(__import__("os").path.join(__import__("os").path.dirname(__file__), "..", "..",
                                          "examples", "mlp.json"), "rb").read()
    with pytest.raises(remat.InvalidOptionError, match="activation_quantization.size_in_md"):
        remat.partition(doc, {"activation_quantization": {"size_in_md": 0}})
    with pytest.raises(remat.InvalidOptionError, match="float8_e9m9"):
        remat.partition(doc, {"activation_quantization": {"quant_type": "torch.float8_e9m9"}})
    with pytest.raises(remat.InvalidOptionError, match="allowed_dtypes"):
        remat.partition(doc, {"activation_quantization": {"allowed_dtypes": "torch.float32;torch.nope"}})
    assert rt.options_from_torch()["activation_quantization"] is None
    with inductor_config.patch(post_grad_fusion_options={
            "activation_quantization_aten_pass": {"size_in_mb": 0, "some_future_key": 1}}):
        assert rt.options_from_torch()["activation_quantization"] == {"size_in_mb": 0.0}
    result = remat.partition(doc, {"activation_quantization": {"size_in_mb": 0,
                                                               "allowed_dtypes": F32}}, as_json=False)
    assert result["quantized_values"], "mlp.json's float32 saved values must be quantized"
    assert all(name in result["saved_values"] for name in result["quantized_values"])
