"""Parity: activation offloading, remat against the running torch live (torch 2.11's
separate stream, which remat refuses, is checked for the refusal).

torch's `enable_activation_offloading` moves CUDA activations to the CPU, but
decides everything from metadata. tests/data/offload/*.json are joint graphs
whose values say "cuda:0" and whose nodes carry meta["should_offload"] as a
joint_custom_pass leaves it (written by tools/capture_offload_graphs.py).
Each test imports one as a joint graph with fake CUDA tensors, runs torch's
partitioner and remat's on independent copies under the same
`torch._functorch.config`, and requires the same saved values, the same
forward/backward graphs node for node (offload/reload ops, names, args and
placement included) and the same metadata on every node offloading touched.
Nothing torch computes is stored.

The prefetch variants need node runtimes, which torch measures with
`benchmark_node` on the device; both sides call the one function the tests
install in its place (remat's hook looks it up where torch's pass does), and
the calls themselves must match too. Dynamic shapes are checked on a graph
captured live on the CPU (the offload pass does not care about the device).
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings

import orjson
import pytest
import torch
import torch._functorch.config as functorch_config
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

import parity

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "offload")
CASES = sorted(f[:-5] for f in os.listdir(DATA) if f.endswith(".json"))

ASYNC = {"activation_offload_separate_stream": True}
# variant id -> torch._functorch.config patch (enable_activation_offloading is on in all)
VARIANTS = {
    "sync": {},
    "sync_ignores_stream_flags": {"activation_offload_sink_wait": True, "activation_reload_prefetch": True},
    "async": ASYNC,
    "async_sink": {**ASYNC, "activation_offload_sink_wait": True},
    "async_prefetch": {**ASYNC, "activation_reload_prefetch": True},
    "async_prefetch_some_overlap": {**ASYNC, "activation_reload_prefetch": True, "activation_offload_cpu_gpu_bw": 0.03},
    "async_sink_prefetch_slow_link": {**ASYNC, "activation_offload_sink_wait": True,
                                      "activation_reload_prefetch": True, "activation_offload_cpu_gpu_bw": 1e-5},
}
BUDGET_VARIANTS = {
    "sync_budget_0.5": {"activation_memory_budget": 0.5},
    "async_prefetch_budget_0.1": {**ASYNC, "activation_reload_prefetch": True, "activation_memory_budget": 0.1},
}
PARTITIONERS = ("min_cut", "default")

# Keys offloading writes into node.meta.
OFFLOAD_KEYS = ("saved_for_offloading", "original_device", "original_size", "original_stride")
OFFLOAD_TARGETS = ("prims.device_put.default", "ao.offload.default", "ao.reload.default", "ao.wait_tensor.default")


@pytest.fixture(scope="module")
def rt():
    return pytest.importorskip("remat.torch")


def _load(name: str) -> dict:
    with open(os.path.join(DATA, f"{name}.json"), "rb") as f:
        return orjson.loads(f.read())


def _fake_mode(gm: torch.fx.GraphModule):
    return next(n.meta["val"].fake_mode for n in gm.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor))


# --- the stand-in for torch's on-device benchmark ---------------------------


class _Bench:
    """Deterministic `benchmark_node`: 1e-5 ms per input element; records calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, node: torch.fx.Node, *args, **kwargs) -> float:
        self.calls.append(node.name)
        numel = 0
        for a in node.all_input_nodes:
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                numel += v.numel()
        return 1e-5 * numel


@contextlib.contextmanager
def _bench_patched():
    from torch._functorch._activation_offloading import activation_offloading as ao

    bench = _Bench()
    saved = ao.benchmark_node
    ao.benchmark_node = bench
    try:
        yield bench
    finally:
        ao.benchmark_node = saved


def _run(fn, doc: dict, config: dict):
    from remat.torch._json_to_fx import import_graph

    gm = import_graph(doc)
    patch = {"enable_activation_offloading": True, **config}
    with _bench_patched() as bench, functorch_config.patch(patch), torch.no_grad(), _fake_mode(gm):
        fw, bw = fn(gm, None, num_fwd_outputs=doc["num_fwd_outputs"],
                    static_lifetime_input_indices=doc["static_lifetime_input_indices"])
    return (fw, bw), bench.calls


# --- metadata ---------------------------------------------------------------


def _val_key(v):
    if isinstance(v, torch.Tensor):
        return ("tensor", str(v.device), tuple(v.shape), tuple(v.stride()), str(v.dtype))
    return ("other", repr(v))


def _meta_key(node: torch.fx.Node) -> tuple:
    m = node.meta
    tm = m.get("tensor_meta")
    tm_key = None if tm is None else (tuple(tm.shape), tuple(tm.stride), str(tm.dtype))
    return (_val_key(m.get("val")), "tensor_meta" in m, tm_key,
            *((k, repr(m.get(k))) for k in OFFLOAD_KEYS))


def _touched(node: torch.fx.Node) -> bool:
    return any(k in node.meta for k in OFFLOAD_KEYS) or parity.target_key(node.target).removeprefix("op:") in OFFLOAD_TARGETS


def offload_meta_diffs(expected, actual) -> list[str]:
    """Differences in the metadata of the nodes offloading made or marked."""
    problems = []
    for side, e_gm, a_gm in (("forward", expected[0], actual[0]), ("backward", expected[1], actual[1])):
        a_nodes = {n.name: n for n in a_gm.graph.nodes}
        for e in e_gm.graph.nodes:
            if not _touched(e):
                continue
            a = a_nodes.get(e.name)
            if a is None or _meta_key(e) != _meta_key(a):
                problems.append(f"{side} node {e.name}: torch meta {_meta_key(e)}, "
                                f"remat {None if a is None else _meta_key(a)}")
    return problems


def _offload_count(fw: torch.fx.GraphModule) -> int:
    return sum(1 for n in fw.graph.nodes if n.name.startswith("cpu_offload_"))


def _running() -> tuple[int, int]:
    return tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def _check_refused_under_2_11(rt, doc: dict, torch_fn, remat_fn, config: dict) -> int:
    """torch 2.11's separate stream numbers streams from dynamo's registry
    (and needs a device to create them): remat refuses it by name
    (offload_async_ops; test_release_rewrites.py) whenever something is
    offloaded; with nothing to offload both leave the graphs alone."""
    import remat

    config = {k: v for k, v in config.items() if k != "activation_offload_cpu_gpu_bw"}  # 2.12's flag
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            actual, _ = _run(remat_fn, doc, config)
        except remat.UnsupportedError as e:
            assert re.search(r"torch 2\.11.*registry", str(e)), e
            return 0
        expected, _ = _run(torch_fn, doc, config)
    assert _offload_count(expected[0]) == 0
    assert not parity.partition_diffs(expected, actual, doc["num_fwd_outputs"])
    return 0


def _check(rt, name: str, partitioner: str, config: dict) -> int:
    doc = _load(name)
    torch_fn, remat_fn = {
        "min_cut": (min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition),
        "default": (default_partition, rt.default_partition),
    }[partitioner]
    if config.get("activation_offload_separate_stream") and _running() < (2, 12):
        return _check_refused_under_2_11(rt, doc, torch_fn, remat_fn, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected, torch_calls = _run(torch_fn, doc, config)
        actual, remat_calls = _run(remat_fn, doc, config)
    label = f"{name}/{partitioner}/{config}"
    problems = parity.partition_diffs(expected, actual, doc["num_fwd_outputs"])
    problems += offload_meta_diffs(expected, actual)
    problems += parity.partition_meta_diffs(expected, actual) if not problems else []
    if torch_calls != remat_calls:
        problems.append(f"benchmark_node calls differ\n  torch: {torch_calls}\n  remat: {remat_calls}")
    assert not problems, f"{label}: mismatch\n" + "\n\n".join(problems)
    return _offload_count(expected[0])


# The default partitioner runs the same pass on other saved values: the
# variants that exercise each of its paths once are enough there.
DEFAULT_VARIANTS = ("sync", "async_sink", "async_sink_prefetch_slow_link", "async_prefetch_some_overlap")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("name", CASES)
def test_offloading_parity_min_cut(rt, name, variant):
    _check(rt, name, "min_cut", VARIANTS[variant])


@pytest.mark.parametrize("variant", DEFAULT_VARIANTS)
@pytest.mark.parametrize("name", CASES)
def test_offloading_parity_default_partition(rt, name, variant):
    _check(rt, name, "default", VARIANTS[variant])


@pytest.mark.parametrize("variant", list(BUDGET_VARIANTS))
@pytest.mark.parametrize("name", CASES)
def test_offloading_parity_under_a_memory_budget(rt, name, variant):
    _check(rt, name, "min_cut", BUDGET_VARIANTS[variant])


def test_the_cases_offload_something_with_both_partitioners(rt):
    """Non-vacuity: torch itself offloads in every stored case (with some
    partitioner), with each partitioner in most cases, and the prefetch
    consults the benchmark."""
    counts = {(p, name): _check(rt, name, p, {}) for p in PARTITIONERS for name in CASES}
    for name in CASES:
        assert any(counts[p, name] for p in PARTITIONERS), f"{name}: torch offloads nothing"
    for p in PARTITIONERS:
        assert sum(1 for name in CASES if counts[p, name]) >= 3, counts
    if _running() < (2, 12):
        return  # 2.11's separate stream (and its prefetch) is refused
    doc = _load("mlp_all")
    _, calls = _run(min_cut_rematerialization_partition, doc, VARIANTS["async_prefetch_some_overlap"])
    assert calls, "the prefetch never asked for a node runtime"


def test_the_stored_graphs_say_cuda():
    for name in CASES:
        devices = {nd["val"]["device"] for nd in _load(name)["nodes"]
                   if nd.get("val", {}).get("kind") == "tensor"}
        assert devices == {"cuda:0"}, (name, devices)


def test_every_offloading_flag_has_a_parity_case():
    """Reads the installed torch's offloading package: a flag it reads that no
    variant here sets fails this test."""
    import torch._functorch._activation_offloading as pkg

    read: set[str] = set()
    folder = os.path.dirname(pkg.__file__)
    for file in os.listdir(folder):
        if file.endswith(".py"):
            with open(os.path.join(folder, file)) as f:
                read |= set(re.findall(r"\bconfig\.(\w+)", f.read()))
    covered = {"enable_activation_offloading"}
    for config in (*VARIANTS.values(), *BUDGET_VARIANTS.values()):
        covered |= set(config)
    assert read, "found no config reads: did the package move?"
    assert read <= covered, f"flags without a parity case: {sorted(read - covered)}"


# --- dynamic shapes, live on the CPU ------------------------------------------


def _marked_capture(case: str):
    from corpus import captured_graphs

    cap = captured_graphs(case)[0]
    fresh = cap.fresh_joint

    def marked():
        gm = fresh()
        for n in gm.graph.nodes:
            if n.op == "call_function":
                n.meta["should_offload"] = True
        return gm

    return cap, marked


def test_offloading_parity_with_dynamic_shapes(rt, monkeypatch):
    from corpus import run_partition

    cap, marked = _marked_capture("dynamic_mlp")
    monkeypatch.setattr(cap, "fresh_joint", marked)
    for torch_fn, remat_fn in ((min_cut_rematerialization_partition, rt.min_cut_rematerialization_partition),
                               (default_partition, rt.default_partition)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = run_partition(torch_fn, cap, enable_activation_offloading=True)
            actual = run_partition(remat_fn, cap, enable_activation_offloading=True)
        assert _offload_count(expected[0]) > 0
        problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
        problems += offload_meta_diffs(expected, actual)
        assert not problems, "\n\n".join(problems)


def test_async_reload_of_a_symbolic_tensor_is_refused_by_name(rt, monkeypatch):
    """torch 2.13 on passes raw SymInts as ao.reload's size and stride; remat
    says it cannot instead of returning other graphs. torch 2.12's reload
    takes no sizes, and remat reproduces it; 2.11's separate stream is
    refused for its stream ids (test_release_rewrites.py)."""
    import remat
    from corpus import run_partition

    cap, marked = _marked_capture("dynamic_mlp")
    monkeypatch.setattr(cap, "fresh_joint", marked)
    if _running() == (2, 12):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = run_partition(min_cut_rematerialization_partition, cap,
                                     enable_activation_offloading=True, **ASYNC)
            actual = run_partition(rt.min_cut_rematerialization_partition, cap,
                                   enable_activation_offloading=True, **ASYNC)
        problems = parity.partition_diffs(expected, actual, cap.num_fwd_outputs)
        assert not problems + offload_meta_diffs(expected, actual)
        return
    why = "symbolic sizes" if _running() >= (2, 13) else "torch 2.11"
    with pytest.raises(remat.UnsupportedError, match=why):
        run_partition(rt.min_cut_rematerialization_partition, cap, enable_activation_offloading=True, **ASYNC)


# --- live inside torch.compile (CPU) -------------------------------------------


def _nop_compiler(gm, _inputs):
    from functorch.compile import make_boxed_func

    return make_boxed_func(gm.forward)


def _compare_in_compile(rt, model, inputs, **config) -> list[str]:
    """Compiles `model` with a partition function that runs torch's and
    remat's min-cut on copies of the joint graph in AOTAutograd's own
    context; returns the differences."""
    from corpus.capture import copy_graph_module
    from torch._dynamo.backends.common import aot_autograd

    problems: list[str] = []

    def compare(joint, joint_inputs, **kwargs):
        from torch.utils.checkpoint import CheckpointPolicy

        offload_tags = (CheckpointPolicy.MUST_CPU_OFFLOAD, CheckpointPolicy.PREFER_CPU_OFFLOAD)
        tagged = sum(1 for n in joint.graph.nodes if n.meta.get("recompute") in offload_tags)
        theirs = copy_graph_module(joint)
        ours = copy_graph_module(joint)
        expected = min_cut_rematerialization_partition(theirs, joint_inputs, **kwargs)
        actual = rt.min_cut_rematerialization_partition(ours, joint_inputs, **kwargs)
        problems.extend(parity.partition_diffs(expected, actual, kwargs["num_fwd_outputs"]))
        problems.extend(offload_meta_diffs(expected, actual))
        problems.extend(parity.partition_meta_diffs(expected, actual))
        problems.append(f"tagged {tagged}, offloaded {_offload_count(expected[0])}")
        return expected

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=_nop_compiler, bw_compiler=_nop_compiler, partition_fn=compare)
    with functorch_config.patch(config), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(model, backend=backend, fullgraph=True)(*inputs).sum().backward()
    return problems


class _SacMLP(torch.nn.Module):
    """A checkpointed block whose matmuls the policy tags MUST_CPU_OFFLOAD."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(12, 12)
        self.b = torch.nn.Linear(12, 12)

    def block(self, x):
        return torch.sigmoid(self.b(torch.relu(self.a(x)))) * x

    def forward(self, x):
        import functools

        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

        ctx = functools.partial(create_selective_checkpoint_contexts, _cpu_offload_mm)
        return checkpoint(self.block, x, use_reentrant=False, context_fn=ctx).cos()


def _cpu_offload_mm(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_CPU_OFFLOAD
    return CheckpointPolicy.PREFER_RECOMPUTE


def _mark_checkpoint_offload(gm, _joint_inputs):
    """A joint pass asking to offload what the policy tagged MUST_CPU_OFFLOAD."""
    from torch.utils.checkpoint import CheckpointPolicy

    for n in gm.graph.nodes:
        if n.meta.get("recompute") == CheckpointPolicy.MUST_CPU_OFFLOAD:
            n.meta["should_offload"] = True
    return gm


def test_cpu_offload_checkpoint_policies_partition_like_torch(rt):
    """MUST_CPU_OFFLOAD tags reach the partitioner; torch treats them as no
    save and no recompute request, and so must remat (with and without
    offloading the nodes they tag)."""
    torch.manual_seed(0)
    x = torch.randn(4, 12, requires_grad=True)
    problems = _compare_in_compile(rt, _SacMLP(), [x])
    assert len(problems) == 1 and re.fullmatch(r"tagged [1-9]\d*, offloaded 0", problems[0]), problems
    problems = _compare_in_compile(rt, _SacMLP(), [x], enable_activation_offloading=True,
                                   joint_custom_pass=_mark_checkpoint_offload)
    assert len(problems) == 1 and re.fullmatch(r"tagged [1-9]\d*, offloaded [1-9]\d*", problems[0]), problems


def test_install_without_fallback_trains_with_offloading(rt):
    """torch.compile through remat.torch.install(fallback=False) with
    offloading on: remat partitions (no fallback), the forward moves the
    marked activations with device_put and the gradients are eager's."""
    from torch._dynamo.backends.common import aot_autograd

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8), torch.nn.Tanh())
    x = torch.randn(5, 8)
    model(x).sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()

    def mark(gm, _joint_inputs):
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target in (torch.ops.aten.relu.default, torch.ops.aten.addmm.default):
                n.meta["should_offload"] = True
        return gm

    forwards: list = []

    def fw_compiler(gm, inputs):
        forwards.append(gm)
        return _nop_compiler(gm, inputs)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=fw_compiler, bw_compiler=_nop_compiler)
    rt.install(fallback=False)
    try:
        with functorch_config.patch(enable_activation_offloading=True, joint_custom_pass=mark):
            torch.compile(model, backend=backend, fullgraph=True)(x).sum().backward()
    finally:
        rt.uninstall()
    puts = [n for n in forwards[0].graph.nodes if n.target is torch.ops.prims.device_put.default]
    assert puts, forwards[0].graph
    for got, expected in zip((p.grad for p in model.parameters()), want):
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("options", [{}, ASYNC], ids=["sync", "async"])
def test_offload_graphs_and_results_match_the_schema(options):
    """The stored graphs (should_offload) and remat's results with offloading
    (saved_for_offloading, original_*) validate against schema/."""
    pytest.importorskip("jsonschema")
    import remat
    from test_schema import JOINT, RESULT, validator

    for name in ("mlp_all", "cnn_compute"):  # jsonschema is slow: two graphs are enough
        doc = _load(name)
        validator(JOINT).validate(doc)
        result = remat.partition(orjson.dumps(doc), {"enable_activation_offloading": True, **options},
                                 as_json=False)
        validator(RESULT).validate(result)
        assert "offload" in result["stages"]
        metas = [nd.get("meta", {}) for nd in result["backward"]["nodes"]]
        assert any("original_size" in m for m in metas), name
