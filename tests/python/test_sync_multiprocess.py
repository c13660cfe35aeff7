"""Cross-rank decision sync across real processes (torch.distributed, gloo).

2 and 4 ranks on this machine (tests/python/sync_worker.py, forked
from a fork server that imported torch once), made to disagree: different
memory budgets, different runtime estimates (a custom estimator
skewed per rank), different shard shapes. For every rank and scenario, torch's
own partitioner with `_sync_decision_cross_ranks` and remat's must produce the
same forward and backward graphs, send the same collectives with the same
payloads and log the same trace artifact; the ranks must really have
disagreed without the sync, and agree with it. Ranks whose graphs differ keep
their own decisions; a graph without collectives sends nothing. Even ranks
running remat while odd ranks run torch agree with each other too. And
torch.compile under install(fallback=False) compiles, agrees and trains.
"""

from __future__ import annotations

import json
import multiprocessing
import socket
from pathlib import Path

import pytest

pytest.importorskip("remat.torch", reason="remat.torch is not importable (engine not built)")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

AGREEING = ["budgets", "estimates", "shards", "default"]
# What every rank imports, loaded once by the fork server the ranks are forked
# from: importing torch in each rank would cost more than the test itself.
PRELOAD = ["torch", "torch.distributed", "functorch.compile", "torch._functorch.partitioners",
           "networkx", "remat.torch", "sync_models", "sync_worker"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_world(world: int, tmp_path: Path) -> list[dict]:
    import sync_worker

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    port = str(_free_port())
    procs = [ctx.Process(target=sync_worker.run, args=(r, world, port, str(tmp_path)))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    if any(p.is_alive() for p in procs):
        for p in procs:
            p.kill()
        pytest.fail("a rank hung: collectives out of step")
    for r, p in enumerate(procs):
        err = tmp_path / f"rank{r}.err"
        assert p.exitcode == 0, f"rank {r} failed:\n{err.read_text() if err.exists() else ''}"
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


def _picked(payload: str) -> int:
    assert payload.startswith("picked_rank_idx=")
    return int(payload[len("picked_rank_idx="):].split(",", 1)[0])


@pytest.fixture(scope="module", params=[2, 4], ids=lambda w: f"{w}ranks")
def world(request, tmp_path_factory):
    return _run_world(request.param, tmp_path_factory.mktemp(f"sync{request.param}"))


def test_remat_equals_torch_on_every_rank(world):
    for rank, results in enumerate(world):
        for label, r in results.items():
            if label in ("mixed", "compiled"):
                continue
            theirs, ours = r["torch"], r["remat"]
            where = f"rank {rank}, {label}"
            assert ours["collectives"] == theirs["collectives"], where
            assert ours["artifacts"] == theirs["artifacts"], where
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


def test_ranks_with_different_graphs_keep_their_own_decisions(world):
    for results in world:
        r = results["graphs_differ"]
        assert [c for c, _ in r["remat"]["collectives"]] == ["all_gather_object"]
        assert r["remat"]["artifacts"] == []
        assert r["remat"]["forward"] == r["unsynced"]["forward"]
        n = results["no_collectives"]
        assert n["remat"]["collectives"] == [] and n["remat"]["artifacts"] == []


def test_remat_and_torch_ranks_agree_with_each_other(world):
    for rank, results in enumerate(world):
        assert results["mixed"]["forward"] == results["budgets"]["torch"]["forward"], rank
        assert results["mixed"]["artifacts"] == results["budgets"]["torch"]["artifacts"], rank


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
        assert len(c["artifacts"]) == 1, rank
        picks.add(_picked(c["artifacts"][0]))
        assert c["grads_equal"], rank
    assert len(picks) == 1
