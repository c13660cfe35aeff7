"""The RNG rewrites on graphs whose metadata says CUDA, live against torch.

Each stored joint graph (tests/data/rng, captured by
tools/capture_rng_graphs.py: checkpointed dropout re-deviced to CUDA) is
partitioned by torch's partitioner and by remat's, in the context AOTAutograd
partitions in, under the configurations that decide which path torch's
functionalize_rng_ops takes:

* graph-safe functionalization (CUDA's default): generator placeholders and
  graphsafe_run_with_rng_state, and torch's fallback to the CPU-style path
  when the random ops span several devices (two_devices) or per op on the
  CPU (cpu_and_cuda);
* graphsafe_rng_functionalization off, or inductor's fallback_random on: the
  CPU-style path with CUDA-sized states;
* memory budgets (min-cut) and the default partitioner;
* the philox path (functionalize_rng_ops: seed/offset inputs, philox_rand);
* invoke_subgraph bodies that take RNG states (thread_graphsafe_rng_from_hops).

Saved values, both graphs node by node, the RNG nodes' meta["val"] and every
node's meta (parity.partition_meta_diffs: the wrapped op's value getitem
carries the op's meta, a rebuilt forward output none) must agree;
expectations come from torch in the same session.
"""

from __future__ import annotations

import re
import types
import warnings

import pytest
import torch
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

import parity
import remat
import rng_graphs

remat_torch = pytest.importorskip("remat.torch")

GRAPHS = rng_graphs.names()
# The graph whose forward takes graph-safe RNG states of its own and of its
# invoke_subgraph bodies: torch numbers both from fwd_rng_state_0 (see
# test_outer_and_hop_states_share_targets_as_in_torch).
COLLIDING = "hop_and_outer_dropout"

# context id -> keyword arguments of rng_graphs.partition_context
CONTEXTS = {
    "graphsafe": {},
    "graphsafe_off": {"graphsafe_rng_functionalization": False},
    "fallback_random": {"fallback_random": True},
    "budget_0.5": {"activation_memory_budget": 0.5},
    "budget_0.05": {"activation_memory_budget": 0.05},
    "budget_0.05_graphsafe_off": {"activation_memory_budget": 0.05, "graphsafe_rng_functionalization": False},
}
PARTITIONERS = {
    "min_cut": (min_cut_rematerialization_partition, "min_cut_rematerialization_partition"),
    "default": (default_partition, "default_partition"),
}
# Every graph under the min-cut's three paths and the default partitioner;
# the contexts that only differ in how torch reaches a path, on a few.
MATRIX = [(g, c, p) for g in GRAPHS if g != COLLIDING
          for c, p in (("graphsafe", "min_cut"), ("graphsafe_off", "min_cut"),
                       ("budget_0.05", "min_cut"), ("graphsafe", "default"))]
MATRIX += [(g, "fallback_random", "min_cut") for g in ("ckpt_dropout", "hop_dropout", COLLIDING)]
MATRIX += [(g, "budget_0.5", "min_cut") for g in ("attention_dropout", "hop_dropout", "philox_attention",
                                                  "two_devices")]
MATRIX += [("two_devices", "fallback_random", "min_cut")]
# Without graph-safe states of its own, the colliding graph threads its
# bodies' states like any other.
MATRIX += [(COLLIDING, c, p) for c, p in (("graphsafe_off", "min_cut"), ("graphsafe_off", "default"),
                                          ("budget_0.05_graphsafe_off", "min_cut"))]


def _run(name: str, partitioner: str, context: dict, side: str = "torch"):
    stored = rng_graphs.load(name)
    fn = PARTITIONERS[partitioner][0] if side == "torch" else getattr(remat_torch, PARTITIONERS[partitioner][1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rng_graphs.run(fn, stored, **context)


def _rng_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    marks = ("rng_state", "graphsafe_run", "run_and_save", "run_with")
    return [n for n in gm.graph.nodes if any(m in n.name for m in marks)]


def _val_key(gm: torch.fx.GraphModule, node: torch.fx.Node):
    """What matters of an RNG node's meta["val"]: a generator's device and
    which body placeholder's generator it is; a tensor's shape, dtype, device."""
    val = node.meta.get("val")
    if isinstance(val, torch.Generator):
        source = None
        for mod_name, mod in gm.named_modules():
            if isinstance(mod, torch.fx.GraphModule) and mod is not gm:
                for p in mod.graph.find_nodes(op="placeholder"):
                    if p.meta.get("val") is val:
                        source = (mod_name, p.name)
        return ("generator", str(val.device), source)
    if isinstance(val, torch.Tensor):
        return ("tensor", tuple(val.shape), val.dtype, str(val.device))
    return (type(val).__name__,)


def _rng_meta_diffs(expected, actual) -> list[str]:
    out = []
    for side, exp, act in zip(("forward", "backward"), expected, actual):
        exp_nodes = {n.name: n for n in _rng_nodes(exp)}
        for node in _rng_nodes(act):
            twin = exp_nodes.get(node.name)
            if twin is not None and _val_key(exp, twin) != _val_key(act, node):
                out.append(f"{side} {node.name}: meta val {_val_key(act, node)} != torch's {_val_key(exp, twin)}")
    return out


def _duplicate_targets(gm: torch.fx.GraphModule) -> bool:
    targets = [n.target for n in gm.graph.find_nodes(op="placeholder")]
    return len(set(targets)) != len(targets)


@pytest.mark.parametrize("name,context,partitioner", MATRIX)
def test_rng_rewrites_match_torch(name, context, partitioner):
    stored = rng_graphs.load(name)
    expected = _run(name, partitioner, CONTEXTS[context])
    if any(_duplicate_targets(gm) for gm in expected):
        pytest.fail(f"{name} [{context}]: torch's graphs share placeholder targets; "
                    "test_outer_and_hop_states_share_targets_as_in_torch covers such cases")
    actual = _run(name, partitioner, CONTEXTS[context], side="remat")
    problems = parity.partition_diffs(expected, actual, stored.num_fwd_outputs)
    problems += _rng_meta_diffs(expected, actual)
    problems += parity.partition_meta_diffs(expected, actual) if not problems else []
    assert not problems, f"{name} [{context}, {partitioner}]\n" + "\n\n".join(problems)


# --------------------------------------------------------------------------- the data exercises each path


def _targets(gm: torch.fx.GraphModule) -> set[str]:
    return {parity.target_key(n.target) for n in gm.graph.nodes}


def _placeholders(gm: torch.fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.find_nodes(op="placeholder")]


@pytest.mark.parametrize("name,path", [
    ("ckpt_dropout", "graphsafe"), ("attention_dropout", "graphsafe"), ("selective_dropout", "graphsafe"),
    ("two_devices", "cpu_style"), ("cpu_and_cuda", "both"), ("philox_dropout", "philox"),
    ("hop_dropout", "hop"),
])
def test_stored_graphs_take_the_path_they_stand_for(name, path):
    """torch takes the path each graph was captured for, so the parity
    matrix cannot pass without running it."""
    fw, bw = _run(name, "min_cut", {})
    graphsafe = "hop:graphsafe_run_with_rng_state" in _targets(fw) & _targets(bw)
    cpu_style = "hop:run_and_save_rng_state" in _targets(fw) and "hop:run_with_rng_state" in _targets(bw)
    if path == "graphsafe":
        assert graphsafe and not cpu_style
        assert any(p.startswith("fwd_rng_state_") for p in _placeholders(fw))
    elif path == "cpu_style":
        assert cpu_style and not graphsafe
    elif path == "both":
        assert cpu_style and graphsafe
    elif path == "philox":
        assert {"fwd_seed_1", "fwd_base_offset_1"} <= set(_placeholders(fw))
        assert "op:rngprims.philox_rand.default" in _targets(fw)
    elif path == "hop":
        assert not graphsafe and not cpu_style  # only the bodies' states
        assert any(p.startswith("fwd_rng_state_") for p in _placeholders(fw))
        assert any(p.startswith("bwd_rng_state_") for p in _placeholders(bw))


def test_graphsafe_off_takes_the_cpu_style_path_with_cuda_sized_states():
    fw, bw = _run("ckpt_dropout", "min_cut", CONTEXTS["graphsafe_off"], side="remat")
    state = next(n for n in bw.graph.find_nodes(op="placeholder") if n.name.startswith("rng_state_output"))
    assert tuple(state.meta["val"].shape) == (16,)  # torch.cuda.get_rng_state(): seed + offset


# --------------------------------------------------------------------------- supports_graphsafe_rng


@pytest.mark.parametrize("device_types,context", [
    (set(), "graphsafe"), ({"cuda", "cpu"}, "graphsafe"), ({"cuda", "cpu"}, "graphsafe_off")])
def test_graphsafe_device_types_follow_torchs_registry(monkeypatch, device_types, context):
    """The device types torch's supports_graphsafe_rng accepts (extended by
    register_graphsafe_rng_device_type) reach the engine: none (every op
    takes the CPU-style path, with CPU-sized states), or the CPU too (a CPU
    op has no device index, which torch asserts and remat reports; with
    graph-safe functionalization off it saves the CPU's state, torch.cpu
    having no get_rng_state of its own)."""
    from torch._functorch._aot_autograd import utils as aot_utils

    if not hasattr(aot_utils, "_GRAPHSAFE_RNG_DEVICE_TYPES"):
        pytest.skip(f"torch {torch.__version__} has no graph-safe RNG device-type registry "
                    "(register_graphsafe_rng_device_type came in 2.13): CUDA alone is graph-safe")
    monkeypatch.setattr(aot_utils, "_GRAPHSAFE_RNG_DEVICE_TYPES", device_types)
    name = "cpu_and_cuda"
    try:
        expected = _run(name, "min_cut", CONTEXTS[context])
    except AssertionError as e:
        assert "device_idx" in str(e) and "cpu" in device_types and context == "graphsafe"
        with pytest.raises(remat.InvalidGraphError, match="needs a device index, and 'cpu' has none"):
            _run(name, "min_cut", CONTEXTS[context], side="remat")
        return
    assert device_types == set() or context == "graphsafe_off"
    actual = _run(name, "min_cut", CONTEXTS[context], side="remat")
    assert not parity.partition_diffs(expected, actual, rng_graphs.load(name).num_fwd_outputs)
    assert not _rng_meta_diffs(expected, actual)
    assert "hop:run_and_save_rng_state" in _targets(actual[0])


# --------------------------------------------------------------------------- HOP bodies


def test_outer_and_hop_states_share_targets_as_in_torch():
    """A forward with graph-safe RNG states of its own and of its
    invoke_subgraph bodies: torch numbers the threaded placeholders from
    fwd_rng_state_0 again, so two placeholders share a target and FX cannot
    generate the module's code (torch returns it stale). The engine returns
    torch's graphs node for node; the drop-in refuses to build the module."""
    from remat.torch._dropin import options_from_torch
    from remat.torch._fx_to_json import export_joint_graph
    from remat.torch._json_to_fx import _build_graph

    stored = rng_graphs.load(COLLIDING)
    expected = _run(COLLIDING, "min_cut", {})
    assert _duplicate_targets(expected[0]), "torch no longer shares targets: add this graph to MATRIX"
    with pytest.raises(remat.UnsupportedError, match="same target 'fwd_rng_state_0'"):
        _run(COLLIDING, "min_cut", {}, side="remat")

    joint, handles = stored.fresh(), []
    with rng_graphs.partition_context(stored):
        doc = export_joint_graph(joint, **stored.partition_kwargs(), as_json=True, handles=handles)
        result = remat.partition(doc, options_from_torch(), "min_cut", as_json=False)
        graphs = [types.SimpleNamespace(graph=_build_graph(result[side]["nodes"], joint, handles, False))
                  for side in ("forward", "backward")]
    assert parity.graph_diff(expected[0], graphs[0], "forward") is None
    assert parity.graph_diff(expected[1], graphs[1], "backward") is None


def test_threaded_calls_extend_eager_input_vals_as_torch():
    """A forward invoke_subgraph records one eager value per argument; the
    call that gets its body's RNG states appends theirs (the generators)."""
    stored = rng_graphs.load("hop_dropout")
    results = []
    for fn in (min_cut_rematerialization_partition, remat_torch.min_cut_rematerialization_partition):
        joint = stored.fresh()
        for n in joint.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph):
            vals = tuple(a.meta.get("val") if isinstance(a, torch.fx.Node) and a.op != "get_attr" else None
                         for a in n.args)
            n.meta["eager_input_vals"] = (vals, {})
        with rng_graphs.partition_context(stored), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fw, _ = fn(joint, [], **stored.partition_kwargs())
        results.append(fw)
    for exp, act in zip(*(r.graph.find_nodes(op="call_function", target=torch.ops.higher_order.invoke_subgraph)
                          for r in results)):
        exp_args, act_args = exp.meta["eager_input_vals"][0], act.meta["eager_input_vals"][0]
        assert len(act_args) == len(act.args) == len(exp_args) == len(exp.args)
        assert [_val_key(results[1], a) for a in act.args[-1:]] == [_val_key(results[0], a) for a in exp.args[-1:]]
        assert act_args[-1] is act.args[-1].meta["val"]
        assert isinstance(act_args[-1], torch.Generator)


@pytest.mark.parametrize("name,context", [
    ("ckpt_dropout", "graphsafe"), ("two_devices", "graphsafe"), ("cpu_and_cuda", "budget_0.05"),
    ("philox_dropout", "graphsafe"), ("hop_dropout", "graphsafe"), ("attention_dropout", "graphsafe_off"),
])
def test_installed_without_fallback_partitions_rng_graphs(name, context):
    """What torch.compile calls after install(fallback=False) (torch's own
    names, patched) partitions every RNG path without handing the graph back
    to torch: no warning, no error, torch's graphs."""
    from torch._functorch import partitioners

    stored = rng_graphs.load(name)
    expected = _run(name, "min_cut", CONTEXTS[context])
    remat_torch.install(fallback=False)
    try:
        assert partitioners.min_cut_rematerialization_partition is not min_cut_rematerialization_partition
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            actual = rng_graphs.run(partitioners.min_cut_rematerialization_partition, stored,
                                    **CONTEXTS[context])
    finally:
        remat_torch.uninstall()
    assert not parity.partition_diffs(expected, actual, stored.num_fwd_outputs)


def test_gpu_check_script_dry_runs_on_the_cpu(capsys):
    """tools/gpu_check_rng.py (run by tools/gpu_check.sh where a GPU is lent)
    trains through install(fallback=False) and compares with torch; its CPU
    dry run keeps the script itself working between GPU runs."""
    import importlib.util
    import os

    path = os.path.join(rng_graphs.ROOT, "tools", "gpu_check_rng.py")
    spec = importlib.util.spec_from_file_location("gpu_check_rng", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rc = mod.main(["--device", "cpu", "--backends", "aot_eager", "--steps", "1", "--only", "hop_dropout"])
    out = capsys.readouterr().out
    assert rc == 0, out
    # One joint graph from 2.13 on; 2.11 and 2.12 trace the HOP's bodies into
    # graphs of their own, which remat partitions too.
    assert re.search(r"ok   hop_dropout \[aot_eager\]: 1 steps, [1-9]\d* graph\(s\) partitioned by remat",
                     out), out
