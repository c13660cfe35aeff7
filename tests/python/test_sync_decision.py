"""Cross-rank decision sync (config._sync_decision_cross_ranks) in one process.

* Without a process group torch's sync does nothing, and neither does remat:
  with the flag on, remat's partition equals torch's, the drop-in neither
  refuses nor falls back, and nothing is sent; torch.compile under
  install(fallback=False) trains as torch does.
* With torch.distributed's fake backend (4 ranks; every collective hands back
  this rank's own data), torch runs its whole protocol; remat must send the
  same collectives with the same payloads (the graph digest, the saved values
  as canonical names, the sizes), log the same trace artifact and return the
  same graphs, for both partitioners, on graphs with collectives in the
  forward and in the backward. On a graph without collectives both send
  nothing.
* The C++ protocol runs on a Python rank group too (remat.partition's
  rank_group): a group whose other ranks send a smaller decision makes remat
  adopt it, in that rank's order.

The real multi-process agreement (gloo, ranks that disagree) is in
test_sync_multiprocess.py.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed as dist

import sync_models as sm
from corpus import captured_graphs, run_partition

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")

SYNC = {"_sync_decision_cross_ranks": True}


@pytest.mark.parametrize("case_name", ["mlp_gelu_d3", "transformer_block", "checkpoint_mlp"])
@pytest.mark.parametrize("kind", ["min_cut", "default"])
def test_without_process_group_sync_changes_nothing(case_name, kind):
    import torch._functorch.partitioners as tp

    assert not (dist.is_available() and dist.is_initialized())
    ours_fn = rt.min_cut_rematerialization_partition if kind == "min_cut" else rt.default_partition
    theirs_fn = tp.min_cut_rematerialization_partition if kind == "min_cut" else tp.default_partition
    for cap in captured_graphs(case_name):
        sent: list = []
        with sm.recording(sent, []), warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # no fallback warning
            theirs = run_partition(theirs_fn, cap, **SYNC, activation_memory_budget=0.5)
            ours = run_partition(ours_fn, cap, **SYNC, activation_memory_budget=0.5)
        assert sent == []
        for t, o in zip(theirs, ours):
            assert sm._lines(o) == sm._lines(t), cap.label


def _train_compiled(case_name: str, **config) -> list[float]:
    from corpus import CASES_BY_NAME
    from corpus.capture import loss_of

    case = CASES_BY_NAME[case_name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, inputs = case.make_module(), case.make_inputs()
    compiled = torch.compile(model, backend="aot_eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    with torch._functorch.config.patch(enable_autograd_cache=False, **config):
        for _ in range(2):
            optimizer.zero_grad()
            loss = loss_of(compiled(*inputs))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    torch._dynamo.reset()
    return losses


def test_install_without_fallback_accepts_the_sync_flag(monkeypatch):
    """install(fallback=False) must not raise for _sync_decision_cross_ranks:
    with no process group torch's sync does nothing, and so does remat, whose
    engine really partitions (no fallback, no warning) and trains as torch."""
    import remat

    assert not (dist.is_available() and dist.is_initialized())
    reference = _train_compiled("mlp_gelu_d3", **SYNC)
    calls = []
    real = remat.partition
    monkeypatch.setattr(remat, "partition", lambda *a, **k: calls.append(k) or real(*a, **k))
    rt.install(fallback=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            losses = _train_compiled("mlp_gelu_d3", **SYNC)
    finally:
        rt.uninstall()
    assert calls and all(k.get("rank_group") is None for k in calls)
    assert losses == reference


def _compile_sync_module():
    """torch._dynamo.distributed where it has the compile-sync group (2.15 on)."""
    import torch._dynamo.distributed as dd

    return dd if hasattr(dd, "get_compile_sync_pg") else None


@pytest.fixture(scope="module")
def fake_world():
    from torch.testing._internal.distributed.fake_pg import FakeStore

    assert not dist.is_initialized()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=4)
    # torch 2.15 talks on dynamo's compile-sync group, a gloo group it makes
    # on first use, which the fake backend cannot make: a fake group of its
    # own (not the default one) stands in, for torch and remat alike.
    dd = _compile_sync_module()
    if dd is not None:
        assert dd._COMPILE_SYNC_PG is None
        dd._COMPILE_SYNC_PG = dist.new_group(backend="fake")
    try:
        yield {
            "mlp_allreduce": sm.capture("mlp_allreduce", *sm.mlp_allreduce()),
            "fsdp_like": sm.capture("fsdp_like", *sm.fsdp_like()),
            "no_collectives": sm.capture("no_collectives", *sm.no_collectives()),
        }
    finally:
        if dd is not None:
            dd._COMPILE_SYNC_PG = None
        dist.destroy_process_group()


CONFIGS = [
    {"activation_memory_budget": 1.0},
    {"activation_memory_budget": 0.3},
    {"activation_memory_budget": 0.05, "activation_memory_budget_solver": "greedy"},
]


@pytest.mark.parametrize("model", ["mlp_allreduce", "fsdp_like"])
@pytest.mark.parametrize("kind", ["min_cut", "default"])
def test_fake_process_group_same_collectives_artifact_and_graphs(fake_world, model, kind):
    theirs_fn, ours_fn = sm.partitioners(kind)
    joint = fake_world[model]
    for config in CONFIGS if kind == "min_cut" else CONFIGS[:1]:
        theirs = sm.run(theirs_fn, joint, **SYNC, **config)
        ours = sm.run(ours_fn, joint, **SYNC, **config)
        # torch ran its protocol to the end: digest, names, sizes.
        assert [c for c, *_ in theirs.collectives] == [
            "all_gather_object", "all_gather_object", "all_reduce"], theirs.collectives
        assert len(theirs.artifacts) == 1
        assert ours.collectives == theirs.collectives, (model, kind, config)
        assert ours.artifacts == theirs.artifacts
        assert ours.forward == theirs.forward
        assert ours.backward == theirs.backward


@pytest.mark.parametrize("kind", ["min_cut", "default"])
def test_fake_process_group_no_collectives_sends_nothing(fake_world, kind):
    theirs_fn, ours_fn = sm.partitioners(kind)
    theirs = sm.run(theirs_fn, fake_world["no_collectives"], **SYNC)
    ours = sm.run(ours_fn, fake_world["no_collectives"], **SYNC)
    assert theirs.collectives == ours.collectives == []
    assert theirs.artifacts == ours.artifacts == []
    assert (ours.forward, ours.backward) == (theirs.forward, theirs.backward)


class ScriptedGroup:
    """A rank group for remat.partition, this process being rank 0 of two,
    whose rank 1 sends `other` (canonical names; None: the same as rank 0)."""

    def __init__(self, other=None, world=2):
        self.other = other
        self.world = world
        self.sent: list = []
        self.picked = None
        self.payload = None

    def rank(self):
        return 0

    def world_size(self):
        return self.world

    def all_gather(self, obj):
        self.sent.append(obj)
        if isinstance(obj, str) or self.other is None:
            return [obj] * self.world
        return [obj] + [self.other] * (self.world - 1)

    def all_reduce_max(self, sizes):
        self.sent.append(list(sizes))
        return list(sizes)

    def target_repr(self, name):
        return f"<function {name}>"

    def target_qualified_name(self, name):
        return name

    def agreed(self, picked, payload):
        self.picked, self.payload = picked, payload


def _doc(joint):
    module = joint.fresh()
    with joint.fake_mode:
        return rt.export_joint_graph(module, joint.kwargs["num_fwd_outputs"],
                                     joint.kwargs.get("static_lifetime_input_indices"), as_json=True)


def test_engine_adopts_the_smaller_decision_of_another_rank(fake_world):
    import remat

    doc = _doc(fake_world["mlp_allreduce"])
    high = rt.options_from_torch(sync_decision_cross_ranks=True, activation_memory_budget=1.0)
    low = dict(high, activation_memory_budget=0.05)
    # Each budget's decision, as this rank would send it.
    decisions = {}
    for name, opts in (("high", high), ("low", low)):
        g = ScriptedGroup()
        decisions[name] = (remat.partition(doc, opts, rank_group=g, as_json=False), g.sent[1])
        assert g.picked == 0
    (high_result, high_names), (low_result, low_names) = decisions["high"], decisions["low"]
    assert high_names != low_names and high_result["saved_values"] != low_result["saved_values"]
    # Rank 1 decided with the low budget, which saves less: rank 0 adopts it,
    # and ends with exactly the partition the low budget gives.
    g = ScriptedGroup(other=low_names)
    adopted = remat.partition(doc, high, rank_group=g, as_json=False)
    assert g.picked == 1 and g.sent[2][1] < g.sent[2][0]
    assert g.payload.startswith("picked_rank_idx=1, saved_nodes of current rank={")
    for key in ("saved_values", "saved_sym_nodes", "forward", "backward"):
        assert adopted[key] == low_result[key], key
    # The other way round, rank 0's own (smaller) decision stands.
    g = ScriptedGroup(other=high_names)
    kept = remat.partition(doc, low, rank_group=g, as_json=False)
    assert g.picked == 0 and kept["saved_values"] == low_result["saved_values"]
    # A rank whose graph differs: nothing more is sent, the decision stands.
    g = ScriptedGroup(other=low_names)
    g.all_gather = lambda obj: g.sent.append(obj) or [obj, "0" * 64]
    alone = remat.partition(doc, high, rank_group=g, as_json=False)
    assert len(g.sent) == 1 and g.picked is None
    assert alone["saved_values"] == high_result["saved_values"]


def test_rank_group_errors_pass_unchanged(fake_world):
    import remat

    doc = _doc(fake_world["mlp_allreduce"])
    group = ScriptedGroup()

    class Timeout(RuntimeError):
        pass

    def fail(obj):
        raise Timeout("collective timed out")

    group.all_gather = fail
    with pytest.raises(Timeout):
        remat.partition(doc, rt.options_from_torch(sync_decision_cross_ranks=True), rank_group=group)



def test_failure_after_ranks_agreed_is_raised_not_handed_to_torch(fake_world, monkeypatch):
    """Once this rank talked to the others, install()'s fallback must not run
    torch's partitioner (its sync would wait on ranks that moved on): the
    failure is raised. Before any collective, the fallback works as usual."""
    import torch._functorch.partitioners as tp

    import remat
    from remat.torch import _dropin, _ranks

    wrapped = _dropin._with_fallback(rt.min_cut_rematerialization_partition,
                                     tp.min_cut_rematerialization_partition)
    joint = fake_world["mlp_allreduce"]

    def broken(self, picked, payload):
        raise ValueError("lost after agreeing")

    with monkeypatch.context() as m:
        m.setattr(_ranks.TorchRankGroup, "agreed", broken)
        with pytest.raises(remat.DropInError) as info, warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            sm.run(wrapped, joint, **SYNC)
        assert isinstance(info.value.__cause__, ValueError)

    with monkeypatch.context() as m:
        m.setattr(_dropin, "export_joint_graph", lambda *a, **k: 1 / 0)
        with pytest.warns(UserWarning, match="falling back"):
            fell_back = sm.run(wrapped, joint, **SYNC)
    assert fell_back == sm.run(tp.min_cut_rematerialization_partition, joint, **SYNC)


def test_without_a_compile_sync_group_remat_raises_torchs_assertion(fake_world, monkeypatch):
    """2.15 on, where dynamo has no compile-sync group to give, torch's sync
    raises an AssertionError; remat's raises the same, unchanged by the
    drop-in (no fallback: torch would raise it too)."""
    dd = _compile_sync_module()
    if dd is None:
        pytest.skip(f"torch {torch.__version__} syncs on the default group: "
                    "dynamo's compile-sync group appeared in 2.15")
    monkeypatch.setattr(dd, "get_compile_sync_pg", lambda: None)
    theirs_fn, ours_fn = sm.partitioners("min_cut")
    raised = []
    for fn in (theirs_fn, ours_fn):
        with pytest.raises(AssertionError) as info:
            sm.run(fn, fake_world["mlp_allreduce"], **SYNC)
        raised.append(str(info.value))
    assert raised[0] == raised[1] == "Compile sync process group must be available here"


def test_collectives_are_made_without_the_python_dispatcher(fake_world, monkeypatch):
    """torch.compile partitions with the Python dispatcher on; a gloo
    collective made under it holds the GIL while it waits for gloo's queue
    lock, which gloo's worker may hold while it needs the GIL (a deadlock
    torch's own sync runs into now and then). remat's collectives are made
    with the dispatcher off, the same collectives all the same."""
    from torch._dispatch.python import enable_python_dispatcher

    key = torch._C.DispatchKey.PythonDispatcher
    seen = []
    gather, reduce = dist.all_gather_object, dist.all_reduce

    def gather_checked(*a, **k):
        seen.append(torch._C._dispatch_tls_is_dispatch_key_included(key))
        return gather(*a, **k)

    def reduce_checked(*a, **k):
        seen.append(torch._C._dispatch_tls_is_dispatch_key_included(key))
        return reduce(*a, **k)

    monkeypatch.setattr(dist, "all_gather_object", gather_checked)
    monkeypatch.setattr(dist, "all_reduce", reduce_checked)
    _, ours_fn = sm.partitioners("min_cut")
    with enable_python_dispatcher():
        assert torch._C._dispatch_tls_is_dispatch_key_included(key)
        ours = sm.run(ours_fn, fake_world["mlp_allreduce"], **SYNC)
    assert seen == [False, False, False]
    assert len(ours.artifacts) == 1
