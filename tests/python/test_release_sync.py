"""Parity of the cross-rank sync's release switches (remat/torch_release.h),
across real processes: 2 and 4 gloo ranks (sync_worker.py, run once per
session by sync_world.py and shared with test_sync_multiprocess.py).

For each switch's scenario, under the running release: every rank's saved
values and graphs, the collectives it sent (payloads and process group),
the sync artifact and torch's debug lines are torch's when every rank runs
remat; ranks running remat and ranks running torch at the same time agree
as if all ran torch. Then the scenario is shown to exercise the switch:
remat with the switch flipped (options' torch_switches) answers otherwise.

  sync_canonical_names (2.13)   rank 1 traced the same graph in another node
      order and saves one more value: 2.13 on recognises the graph and syncs
      rank 1 to the smallest decision, 2.11/2.12 (node names in graph order)
      do not, and rank 1 keeps its own.
  sync_stable_target_str (2.14) a graph calling operator.getitem: the digest
      spells it "<built-in function getitem>" up to 2.13 and
      "_operator.getitem" from 2.14 on; remat ranks spelling it the other
      way no longer recognise torch ranks' graph. 2.14 also logs which rank
      differed. Without canonical names (2.11/2.12) targets are not hashed.
  sync_decision_compile_pg (2.15) the collectives run on dynamo's
      compile-sync gloo group instead of the default group; flipped, remat
      talks on the other group (2.15), or refuses where torch has no such
      group (before 2.15).
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.fx as fx

rt = pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import sync_world  # noqa: E402
from remat.torch import _ranks, _release  # noqa: E402

SKIPPING = "Skipping sync decision cross rank due to different inputs between rank 0 and rank {}"


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def world(request, tmp_path_factory):
    return sync_world.results(request.param, tmp_path_factory)


def _saved(run: dict) -> str:
    """The forward's output line: its outputs, then the saved values."""
    assert run["error"] == "", run["error"]
    return run["forward"][-1]


def _assert_parity(world: list, label: str) -> None:
    """remat on every rank is torch on every rank; so is remat on even ranks
    with torch on odd ranks."""
    for rank, results in enumerate(world):
        theirs = results[label]["torch"]
        assert theirs["error"] == "", (rank, theirs["error"])
        for run in ("remat", "mixed"):
            ours = results[label][run]
            where = f"rank {rank}, {label}, {run}"
            assert ours["error"] == "", (where, ours["error"])
            for key in ("forward", "backward", "collectives", "artifacts", "debug"):
                assert ours[key] == theirs[key], f"{where}: {key}"


def _synced(world: list, label: str, run: str = "torch") -> list[bool]:
    return [len(results[label][run]["artifacts"]) == 1 for results in world]


def test_sync_canonical_names(world):
    label = "sync_canonical_names"
    _assert_parity(world, label)
    canonical = _release.behaves("sync_canonical_names")
    # Rank 1's own decision differs from rank 0's (it saves sin).
    assert _saved(world[1][label]["unsynced"]) != _saved(world[0][label]["unsynced"])
    # torch recognises rank 1's reordered graph from 2.13 on, and then every
    # rank holds rank 0's (smaller) decision; before, rank 1 keeps its own.
    assert _synced(world, label) == [canonical] * len(world)
    rank1 = world[1][label]
    if canonical:
        assert _saved(rank1["torch"]) == _saved(world[0][label]["unsynced"])
    else:
        assert _saved(rank1["torch"]) == _saved(rank1["unsynced"])
        assert [c for c, *_ in rank1["torch"]["collectives"]] == ["all_gather_object"]
    # The other side of the switch answers the other way on rank 1.
    assert _synced(world, label, "flipped") == [not canonical] * len(world)
    assert _saved(rank1["flipped"]) != _saved(rank1["torch"])
    # A remat rank naming nodes the other way never meets a torch rank.
    assert _synced(world, label, "mixed_flipped") == [False] * len(world)


def test_sync_stable_target_str(world):
    label = "sync_stable_target_str"
    _assert_parity(world, label)
    stable = _release.behaves("sync_stable_target_str")
    canonical = _release.behaves("sync_canonical_names")
    # The ranks disagree on their own and agree through the sync.
    assert len({_saved(r[label]["unsynced"]) for r in world}) > 1
    assert _synced(world, label) == [True] * len(world)
    # Ranks whose graphs differ: from 2.14 on torch says which rank differed
    # first (remat's line is compared with torch's by _assert_parity too).
    for rank, results in enumerate(world):
        differ = results["graphs_differ"]
        expected = [SKIPPING.format(1)] if stable else []
        assert differ["torch"]["debug"] == differ["remat"]["debug"] == expected, rank
    if not canonical:
        # 2.11 and 2.12 hash node names, not targets: the switch has no
        # effect there, flipped or not.
        for results in world:
            for run in ("flipped", "mixed_flipped"):
                assert results[label][run]["collectives"] == results[label]["torch"]["collectives"]
                assert _saved(results[label][run]) == _saved(results[label]["torch"])
        return
    # The other side of the switch sends another digest ...
    digest = world[0][label]["torch"]["collectives"][0]
    flipped_digest = world[0][label]["flipped"]["collectives"][0]
    assert digest[0] == flipped_digest[0] == "all_gather_object"
    assert flipped_digest[1] != digest[1]
    # ... so remat ranks spelling targets the other way and torch ranks no
    # longer recognise each other's graph, and keep their own decisions.
    assert _synced(world, label, "mixed_flipped") == [False] * len(world)
    assert [_saved(r[label]["mixed_flipped"]) for r in world] == \
        [_saved(r[label]["unsynced"]) for r in world]


def test_sync_stable_target_str_spells_python_functions_as_the_release():
    """A Python function's str() holds its address (different in every
    process: 2.13's digests of such graphs never match across ranks); its
    qualified name does not. remat's rank group gives the engine both, as
    torch spells them."""
    g = fx.Graph()
    x = g.placeholder("x")
    s = g.call_function(torch.sym_not, (x,))
    i = g.call_function(operator.getitem, (x, 0))
    g.output((s, i))
    group = _ranks.TorchRankGroup(fx.GraphModule(torch.nn.Module(), g))
    assert group.target_repr("torch.sym_not") == str(torch.sym_not)
    assert " at 0x" in group.target_repr("torch.sym_not")
    assert group.target_repr("operator.getitem") == "<built-in function getitem>"
    assert group.target_qualified_name("torch.sym_not") == "torch.sym_not"
    assert group.target_qualified_name("operator.getitem") == "_operator.getitem"
    import torch._functorch.partitioners as tp

    stable = getattr(tp, "_stable_target_str", None)
    if stable is not None:  # 2.14 on: torch's own spelling
        assert group.target_qualified_name("torch.sym_not") == stable(torch.sym_not)
        assert group.target_qualified_name("operator.getitem") == stable(operator.getitem)


def test_sync_decision_compile_pg(world):
    label = "sync_decision_compile_pg"
    _assert_parity(world, label)
    compile_pg = _release.behaves("sync_decision_compile_pg")
    assert _synced(world, label) == [True] * len(world)
    for rank, results in enumerate(world):
        theirs = results[label]["torch"]
        groups = {group for _, _, group in theirs["collectives"]}
        assert len(theirs["collectives"]) == 3, rank
        if compile_pg:
            (group,) = groups
            assert group.startswith("pg ") and group.endswith("pt2_compile_sync_pg"), group
        else:
            assert groups == {"default"}, rank
        flipped = results[label]["flipped"]
        if compile_pg:
            # Flipped, remat talks on the default group: the same decision,
            # on a group torch ranks do not listen to.
            assert {group for _, _, group in flipped["collectives"]} == {"default"}, rank
            assert flipped["forward"] == theirs["forward"], rank
        else:
            # torch before 2.15 has no compile-sync group to talk on: remat
            # refuses before any collective (install() then falls back).
            assert flipped["collectives"] == [], rank
            assert flipped["error"].startswith("UnsupportedError: "), flipped["error"]
            assert "get_compile_sync_pg" in flipped["error"], flipped["error"]
