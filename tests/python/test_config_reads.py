"""How the drop-in reads torch's config: the same answers, at less cost.

Contract pinned here (remat/torch/_internals.py config_value,
remat/torch/_dropin.py _options_from_torch): on a graph of a few nodes,
reading some 30 config flags was the largest fixed cost of a drop-in
partition (bench/bench_small_dynamic.py), so
  * config_value(config, name[, default]) answers exactly as getattr does,
    under every supported release's ConfigModule: defaults, assignments,
    patches, flags the release lacks, nested configs;
  * a drop-in default partition reads the flags only the min-cut reads
    (_MIN_CUT_ONLY) only when the graph has recompute tags (the default
    partitioner then may hand it to the min-cut), and its graphs stay
    torch's whatever those flags say.
Runs under every release: ConfigModule differs between them.
"""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config as functorch_config
import torch._inductor.config as inductor_config
from torch._functorch.partitioners import default_partition

from corpus import captured_graphs, dynamic_joint, replay_context
from corpus.capture import copy_graph_module
from remat.torch import _dropin, _internals
import remat.torch as rt

# Every flag options_from_torch and the trace read, and names no release has.
FUNCTORCH_NAMES = (*_dropin._CONFIG_FIELDS, "activation_memory_budget_solver",
                   "activation_memory_budget_runtime_estimator", "graphsafe_rng_functionalization",
                   "enable_activation_offloading", "activation_offload_separate_stream",
                   "activation_offload_sink_wait", "activation_reload_prefetch",
                   "activation_offload_cpu_gpu_bw", "_sync_decision_cross_ranks",
                   "visualize_memory_budget_pareto", "no_release_has_this_flag")
INDUCTOR_NAMES = ("fallback_random", "post_grad_fusion_options", "cpu_gpu_bw", "no_release_has_this_flag")
MISSING = object()


def _same_answers(config, names) -> None:
    for name in names:
        expected = getattr(config, name, MISSING)
        assert _internals.config_value(config, name, MISSING) == expected, name
        if expected is MISSING:
            with pytest.raises(AttributeError):
                _internals.config_value(config, name)
        else:
            assert _internals.config_value(config, name) == expected, name


def test_config_value_answers_as_getattr():
    _same_answers(functorch_config, FUNCTORCH_NAMES)
    _same_answers(inductor_config, INDUCTOR_NAMES)
    # A nested config: the same proxy's answers.
    assert (_internals.config_value(inductor_config, "test_configs").graphsafe_rng_func_ignores_fallback_random
            == inductor_config.test_configs.graphsafe_rng_func_ignores_fallback_random)


def test_config_value_follows_patches_and_assignments():
    with functorch_config.patch(cse=False, max_dist_from_bw=7, activation_memory_budget=0.25):
        assert _internals.config_value(functorch_config, "cse") is False
        assert _internals.config_value(functorch_config, "max_dist_from_bw") == 7
        assert _internals.config_value(functorch_config, "activation_memory_budget") == 0.25
        _same_answers(functorch_config, FUNCTORCH_NAMES)
    before = functorch_config.recompute_views
    functorch_config.recompute_views = not before
    try:
        assert _internals.config_value(functorch_config, "recompute_views") is (not before)
    finally:
        functorch_config.recompute_views = before
    assert _internals.config_value(functorch_config, "recompute_views") is before
    with inductor_config.patch(fallback_random=True):
        assert _internals.config_value(inductor_config, "fallback_random") is True
    # A flag the release lacks, asked again after it was found absent.
    for _ in range(2):
        assert _internals.config_value(functorch_config, "no_release_has_this_flag", 3) == 3


def _flags_read(monkeypatch, partition, joint, kwargs) -> set[str]:
    read: set[str] = set()
    real = _internals.config_value

    def spy(config, name, *default):
        read.add(name)
        return real(config, name, *default)

    monkeypatch.setattr(_internals, "config_value", spy)
    partition(joint, None, **kwargs)
    monkeypatch.setattr(_internals, "config_value", real)
    return read


def _untagged_joint():
    weight = torch.randn(4, 4, requires_grad=True)
    gm, kwargs = dynamic_joint(lambda x: (x @ weight).sin().sum(), torch.randn(6, 4))
    assert not any("recompute" in n.meta for n in gm.graph.nodes)
    return gm, kwargs


def test_default_partition_reads_min_cut_flags_only_with_recompute_tags(monkeypatch):
    gm, kwargs = _untagged_joint()
    untagged = _flags_read(monkeypatch, rt.default_partition, gm, kwargs)
    assert untagged and not untagged & _dropin._MIN_CUT_ONLY
    gm, kwargs = _untagged_joint()
    assert _dropin._MIN_CUT_ONLY <= _flags_read(monkeypatch, rt.min_cut_rematerialization_partition, gm, kwargs)
    # A checkpointed region's nodes carry recompute tags.
    cap = captured_graphs("checkpoint_dropout")[0]
    assert any("recompute" in n.meta for n in cap.joint_module.graph.nodes)
    with replay_context(cap):
        tagged = _flags_read(monkeypatch, rt.default_partition, cap.fresh_joint(), cap.partition_kwargs())
    assert _dropin._MIN_CUT_ONLY <= tagged


def test_default_partition_graphs_ignore_the_min_cut_flags():
    """The flags left unread cannot matter: with seven of them away from
    their defaults, the drop-in's default partition still gives torch's graphs."""
    odd = {"cse": False, "recompute_views": True, "max_dist_from_bw": 3, "ban_recompute_reductions": False,
           "aggressive_recomputation": True, "activation_memory_budget": 0.3,
           "activation_memory_budget_solver": "greedy"}
    gm, kwargs = _untagged_joint()
    fresh = [copy_graph_module(gm) for _ in range(2)]
    with functorch_config.patch(odd):
        theirs = default_partition(fresh[0], None, **kwargs)
        ours = rt.default_partition(fresh[1], None, **kwargs)
    for t, o in zip(theirs, ours):
        assert o.code == t.code

