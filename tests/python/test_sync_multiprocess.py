"""Cross-rank decision sync across real processes (torch.distributed, gloo).

2 and 4 ranks on this machine (tests/python/sync_worker.py, run by
sync_world.py), made to disagree: different memory budgets, different runtime
estimates (a custom estimator skewed per rank), different shard shapes. For
every rank and scenario, torch's own partitioner with
`_sync_decision_cross_ranks` and remat's must produce the same forward and
backward graphs, send the same collectives with the same payloads on the
same process group, and log the same trace artifact and debug lines; the
ranks must really have disagreed without the sync, and agree with it; so
must ranks that searched under remat's own peak limits, one per rank. Ranks
whose graphs differ keep their own decisions; a graph without collectives
sends nothing. Ranks running remat and ranks running torch at the same time
agree with each other in every scenario, under the running release, also
when install() fell back to torch on some ranks. And torch.compile under
install(fallback=False) compiles, agrees and trains.

No world can hang the suite: sync_world stops a world as soon as a rank
fails, or when its ranks stall, naming where each rank was; the last tests
check that on worlds whose ranks fall out of step on purpose.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import sync_world  # noqa: E402

AGREEING = ["budgets", "estimates", "shards", "default"]
NOT_COMPILED = ["budgets", "estimates", "shards", "default", "graphs_differ", "no_collectives",
                "sync_canonical_names", "sync_stable_target_str", "sync_decision_compile_pg"]


def _picked(payload: str) -> int:
    assert payload.startswith("picked_rank_idx=")
    return int(payload[len("picked_rank_idx="):].split(",", 1)[0])


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def world(request, tmp_path_factory):
    return sync_world.results(request.param, tmp_path_factory)


def test_remat_equals_torch_on_every_rank(world):
    for rank, results in enumerate(world):
        for label in NOT_COMPILED:
            theirs, ours = results[label]["torch"], results[label]["remat"]
            where = f"rank {rank}, {label}"
            assert ours["error"] == theirs["error"] == "", where
            assert ours["collectives"] == theirs["collectives"], where
            assert ours["artifacts"] == theirs["artifacts"], where
            assert ours["debug"] == theirs["debug"], where
            assert ours["forward"] == theirs["forward"], where
            assert ours["backward"] == theirs["backward"], where


def test_ranks_that_disagreed_agree_on_the_smallest_decision(world):
    for label in AGREEING:
        synced = [results[label]["torch"] for results in world]
        # Every rank ran the whole protocol and picked the same rank.
        picks = {_picked(s["artifacts"][0]) for s in synced if len(s["artifacts"]) == 1}
        assert len(picks) == 1 and all(len(s["artifacts"]) == 1 for s in synced), label
        (picked,) = picks
        # ... whose own unsynced decision every rank now has: the forward
        # returns the same values (shapes in the graphs may differ per rank).
        for s in synced:
            assert s["forward"][-1] == world[picked][label]["unsynced"]["forward"][-1], label
    # The scenarios made the ranks disagree in the first place.
    for label in ("budgets", "estimates", "shards"):
        unsynced = {results[label]["unsynced"]["forward"][-1] for results in world}
        assert len(unsynced) > 1, f"{label}: the ranks agreed without syncing"


def test_ranks_with_different_peak_limits_agree_on_one_plan(world):
    """remat's own peak limit, a different one per rank (sync_worker's
    PEAK_FRACTIONS of the way from fast's smallest peak to the plain
    plan's): each rank's search finds its
    own plan, and with the sync flag every rank runs the one picked by
    torch's protocol (the smallest saved total), as for torch's decisions."""
    runs = [results["peak_limits"] for results in world]
    for rank, r in enumerate(runs):
        assert r["unsynced"]["error"] == r["remat"]["error"] == "", f"rank {rank}"
        assert r["unsynced"]["artifacts"] == [], f"rank {rank}"
    picks = {_picked(r["remat"]["artifacts"][0]) for r in runs if len(r["remat"]["artifacts"]) == 1}
    assert len(picks) == 1 and all(len(r["remat"]["artifacts"]) == 1 for r in runs)
    (picked,) = picks
    for r in runs:
        assert r["remat"]["forward"][-1] == runs[picked]["unsynced"]["forward"][-1]
    assert len({r["unsynced"]["forward"][-1] for r in runs}) > 1, "the ranks agreed without syncing"


def test_ranks_with_different_graphs_keep_their_own_decisions(world):
    for results in world:
        r = results["graphs_differ"]
        assert [c for c, *_ in r["remat"]["collectives"]] == ["all_gather_object"]
        assert r["remat"]["artifacts"] == []
        assert r["remat"]["forward"] == r["unsynced"]["forward"]
        n = results["no_collectives"]
        assert n["remat"]["collectives"] == [] and n["remat"]["artifacts"] == []


def test_remat_and_torch_ranks_agree_with_each_other(world):
    """Even ranks ran remat while odd ranks ran torch, in every scenario:
    each rank ends with the decision, graphs and artifact it has when every
    rank runs torch."""
    for rank, results in enumerate(world):
        for label in NOT_COMPILED:
            mixed, theirs = results[label]["mixed"], results[label]["torch"]
            where = f"rank {rank} ({'remat' if rank % 2 == 0 else 'torch'}), {label}"
            assert mixed["error"] == "", where
            assert mixed["forward"] == theirs["forward"], where
            assert mixed["backward"] == theirs["backward"], where
            assert mixed["artifacts"] == theirs["artifacts"], where
            assert mixed["collectives"] == theirs["collectives"], where


def test_install_without_fallback_compiles_and_agrees(world):
    """torch.compile under install(fallback=False) with the sync flag and
    per-rank budgets: no rank raises, every rank's engine talks through
    torch.distributed, all ranks log the same pick, gradients are eager's."""
    if "compiled" not in world[0]:
        pytest.skip("run in the 2-rank world only")
    picks = set()
    for rank, results in enumerate(world):
        c = results["compiled"]
        assert c["engine_groups"] == [True], rank  # one joint graph, synced by remat
        assert c["fell_back"] == [], rank
        assert len(c["artifacts"]) == 1, rank
        picks.add(_picked(c["artifacts"][0]))
        assert c["grads_equal"], rank
    assert len(picks) == 1


def test_a_rank_whose_install_fell_back_to_torch_agrees_with_remat_ranks(world):
    """install() on every rank, remat failing before any collective on odd
    ranks: those fall back to torch's partitioner, whose own sync meets
    remat's on the even ranks (the same group, the same collectives)."""
    if "compiled_fallback" not in world[0]:
        pytest.skip("run in the 2-rank world only")
    picks = set()
    for rank, results in enumerate(world):
        c = results["compiled_fallback"]
        if rank % 2:
            assert c["engine_groups"] == [] and len(c["fell_back"]) == 1, rank
        else:
            assert c["engine_groups"] == [True] and c["fell_back"] == [], rank
        assert len(c["artifacts"]) == 1, rank
        picks.add(_picked(c["artifacts"][0]))
        assert c["grads_equal"], rank
    assert len(picks) == 1
    # The same pick as when every rank ran remat.
    assert picks == {_picked(world[0]["compiled"]["artifacts"][0])}


# --- a world that falls out of step fails fast, saying where ------------------------------


def test_ranks_out_of_step_fail_within_the_collective_timeout(tmp_path):
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as info:
        sync_world.run_world(2, tmp_path, target="out_of_step", collective_timeout_s=3)
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "rank 0 of 2 failed" in message, message
    assert "'all_gather_object alone'" in message, message  # where rank 0 was
    assert elapsed < 60, elapsed


def test_ranks_that_stall_are_stopped_with_where_they_were(tmp_path):
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as info:
        sync_world.run_world(2, tmp_path, target="stall", stall_s=3)
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert "no rank moved on for 3 s" in message, message
    assert "rank 1: running at 'sleeping'" in message, message
    assert elapsed < 60, elapsed
