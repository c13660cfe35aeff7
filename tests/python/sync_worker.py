"""One rank of the multi-process sync tests (sync_world.py runs them):
`run(rank, world, port, out, timeout_s)`, or
`python sync_worker.py RANK WORLD PORT OUT` by hand.

Joins a gloo group on 127.0.0.1:PORT (collectives time out after
`timeout_s`), captures joint graphs with functional collectives
(sync_models), then runs every scenario under the same per-rank config with:
  unsynced       torch's partitioner without the sync (each rank's own decision)
  torch, remat   torch's, resp. remat's, with `_sync_decision_cross_ranks`
  mixed          remat on even ranks, torch on odd ranks, at the same time
  flipped        remat on every rank with the scenario's release switch
                 flipped (the other side of that switch)
  mixed_flipped  flipped remat on even ranks, torch on odd ranks
recording graphs, the collectives each sent (and on which group), the sync
artifacts and debug lines (sync_models.run). Ranks are made to disagree:
different memory budgets, different runtime estimates, different shard
shapes, a MUST_SAVE tag on one rank, remat's peak limits (the "peak_limits"
scenario: remat only, unsynced and synced). Every rank runs the same sequence, so
the collectives line up; before each partition a rank writes its step to
OUT/rank<RANK>.step (sync_world watches it); at the end OUT/rank<RANK>.json.
On SIGUSR1 a rank writes its threads' stacks to OUT/rank<RANK>.stack.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
import time
import warnings
from typing import Optional

import torch
import torch.distributed as dist
from torch._inductor.custom_graph_pass import CustomRuntimeEstimator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sync_models as sm  # noqa: E402

BUDGETS = [0.05, 0.6, 0.2, 1.0]
# Per rank, where remat's peak limit lies between the smallest peak fast
# reaches (0) and the plain plan's (1): the ranks' searches find different
# plans, and must agree on one.
PEAK_FRACTIONS = [1.0, 0.2, 0.6, 0.4]
SYNC = {"_sync_decision_cross_ranks": True}


class RankSkewedEstimator(CustomRuntimeEstimator):
    """Runtimes that differ per rank: each rank's knapsack prefers other nodes."""

    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, node) -> float:
        return float(1 + (sum(map(ord, node.name)) * (self.rank + 3)) % 11)

    def uuid(self):
        return None


@dataclasses.dataclass
class Scenario:
    label: str
    joint: str
    kind: str                 # "min_cut" or "default"
    config: dict
    switch: str = ""          # the release switch its flipped runs flip
    runs: tuple = ("unsynced", "torch", "remat", "mixed")
    # remat's own options (a peak limit): remat only, unsynced and synced.
    remat_options: Optional[dict] = None


class Rank:
    def __init__(self, rank: int, out: str):
        self.rank, self.out = rank, out

    def step(self, name: str) -> None:
        with open(os.path.join(self.out, f"rank{self.rank}.step"), "w") as f:
            f.write(name)

    def run(self, s: Scenario, joints: dict) -> dict:
        import remat.torch as rt

        theirs_fn, ours_fn = sm.partitioners(s.kind)
        joint = joints[s.joint]
        flipped_fn = None
        if s.switch:
            flipped = not rt._release.behaves(s.switch)
            flipped_fn = sm.remat_with(torch_switches={s.switch: flipped})
        even = self.rank % 2 == 0
        fns = {
            "unsynced": (theirs_fn, {}),
            "torch": (theirs_fn, SYNC),
            "remat": (ours_fn, SYNC),
            "mixed": (ours_fn if even else theirs_fn, SYNC),
            "flipped": (flipped_fn, SYNC),
            "mixed_flipped": (flipped_fn if even else theirs_fn, SYNC),
        }
        if s.remat_options is not None:  # remat's own search: torch has none
            ours = sm.remat_with(**s.remat_options)
            fns = {"unsynced": (ours, {}), "remat": (ours, SYNC)}
        out = {}
        for run in s.runs:
            self.step(f"{s.label}: {run}")
            fn, sync = fns[run]
            # A flipped switch may be one this torch cannot run: recorded.
            out[run] = dataclasses.asdict(sm.run(fn, joint, expect_error=run == "flipped",
                                                 **sync, **s.config))
        return out


def compiled_under_install(rank: int, budget: dict, *, fallback_on_odd_ranks: bool) -> dict:
    """torch.compile (aot_eager) of the all-reduce MLP under remat.torch.install
    with the sync flag and this rank's budget: it must compile without
    raising, agree with the other ranks (one artifact each) and compute
    eager's gradients. Without `fallback_on_odd_ranks`, install(fallback=False)
    and every rank's engine syncs; with it, install() and odd ranks' remat
    fails before talking to anyone, so install() hands their graph to torch,
    whose own sync must meet remat's on the even ranks."""
    import remat
    import remat.torch as rt
    from remat.torch import _dropin

    fn, inputs = sm.mlp_allreduce(width=16, depth=4)
    eager_inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    fn(*eager_inputs).backward()
    engine_groups: list = []
    artifacts: list = []
    real, real_export = remat.partition, _dropin.export_joint_graph
    remat.partition = lambda *a, **k: engine_groups.append(k.get("rank_group") is not None) or \
        real(*a, **k)
    fell_back = fallback_on_odd_ranks and rank % 2 == 1
    import torch._functorch.partitioners as tp

    real_sync = tp._sync_decision_cross_ranks
    if fell_back:
        def broken_export(*a, **k):
            raise RuntimeError("this rank's export fails")

        _dropin.export_joint_graph = broken_export
        # torch's own sync, run inside torch.compile (the Python dispatcher
        # on), can deadlock gloo (the GIL against ProcessGroupGloo's queue
        # lock; seen under 2.12 about once in 50 compiles); remat's drop-in
        # makes the same collectives without the Python dispatcher, and so
        # does torch's here, so that the test measures remat, not that bug.
        def sync_without_python_dispatcher(*a, **k):
            from torch._dispatch.python import no_python_dispatcher

            with no_python_dispatcher():
                return real_sync(*a, **k)

        tp._sync_decision_cross_ranks = sync_without_python_dispatcher
    torch._dynamo.reset()
    rt.install(fallback=fallback_on_odd_ranks)
    try:
        import torch._functorch.config as fconfig

        with fconfig.patch(enable_autograd_cache=False, **SYNC, **budget), \
                sm.recording([], artifacts), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = torch.compile(fn, backend="aot_eager")(*inputs)
            loss.backward()
    finally:
        rt.uninstall()
        remat.partition, _dropin.export_joint_graph = real, real_export
        tp._sync_decision_cross_ranks = real_sync
        torch._dynamo.reset()
    grads_equal = all(torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6)
                      for a, b in zip(inputs, eager_inputs) if a.requires_grad)
    fallbacks = [str(w.message) for w in caught if "falling back" in str(w.message)]
    return {"engine_groups": engine_groups, "artifacts": artifacts, "grads_equal": grads_equal,
            "fell_back": fallbacks}


def run(rank: int, world: int, port: str, out: str, timeout_s: float = 60) -> None:
    """Writes OUT/rank<RANK>.json, or OUT/rank<RANK>.err with the traceback."""
    _reporting(rank, out, lambda: _run(rank, world, port, out, timeout_s))


def _run(rank: int, world: int, port: str, out: str, timeout_s: float) -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)  # ranks share this machine's cores
    me = Rank(rank, out)
    me.step("init_process_group")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    torch.manual_seed(0)
    me.step("capture")
    joints = {
        "mlp": sm.capture("mlp", *sm.mlp_allreduce(width=32, depth=6)),
        # Activations outweigh the weights: room for remat's peak limits.
        "wide": sm.capture("wide", *sm.mlp_allreduce(width=32, depth=6, batch=256)),
        "shards": sm.capture("shards", *sm.fsdp_like(width=16, batch=4 + 8 * rank)),
        "differ": sm.capture("differ", *sm.extra_op_on(1)),
        "none": sm.capture("none", *sm.no_collectives()),
        # Rank 1 traces the branches in the other order, and saves sin.
        "branches": sm.capture("branches", *sm.branches(swap=rank == 1)),
        "getitems": sm.capture("getitems", *sm.getitems()),
    }
    if rank == 1:
        sm.tag_must_save(joints["branches"], torch.ops.aten.sin.default)
    budget = {"activation_memory_budget": BUDGETS[rank % len(BUDGETS)]}
    switch_runs = ("unsynced", "torch", "remat", "mixed", "flipped", "mixed_flipped")
    scenarios = [
        Scenario("budgets", "mlp", "min_cut", budget),
        Scenario("estimates", "mlp", "min_cut", {
            "activation_memory_budget": 0.3,
            "activation_memory_budget_runtime_estimator": RankSkewedEstimator(rank)}),
        Scenario("shards", "shards", "min_cut", budget),
        Scenario("default", "mlp", "default", {}),
        Scenario("graphs_differ", "differ", "min_cut", budget),
        Scenario("no_collectives", "none", "min_cut", budget),
        # The parity scenarios of the sync's release switches.
        Scenario("sync_canonical_names", "branches", "min_cut", {},
                 switch="sync_canonical_names", runs=switch_runs),
        Scenario("sync_stable_target_str", "getitems", "min_cut", budget,
                 switch="sync_stable_target_str", runs=switch_runs),
        # A flipped group cannot meet torch's ranks (they would wait on
        # another group until the timeout): no mixed_flipped.
        Scenario("sync_decision_compile_pg", "mlp", "min_cut", budget,
                 switch="sync_decision_compile_pg", runs=switch_runs[:-1]),
    ]
    me.step("peak_range")
    plain, smallest = sm.peak_range(joints["wide"])
    peak_limit = {"peak_memory_budget": smallest + int((plain - smallest) * PEAK_FRACTIONS[rank % 4]),
                  "peak_search": "fast"}
    scenarios.append(Scenario("peak_limits", "wide", "min_cut", {}, runs=("unsynced", "remat"),
                              remat_options=peak_limit))
    results: dict = {}
    for s in scenarios:
        results[s.label] = me.run(s, joints)
    if world == 2:  # once is enough: torch.compile costs seconds per rank
        me.step("compiled")
        results["compiled"] = compiled_under_install(rank, budget, fallback_on_odd_ranks=False)
        me.step("compiled_fallback")
        results["compiled_fallback"] = compiled_under_install(rank, budget,
                                                              fallback_on_odd_ranks=True)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f, default=repr)
    me.step("barrier")
    dist.barrier()
    dist.destroy_process_group()
    me.step("done")


# --- worlds that go wrong on purpose (sync_world's own limits) ------------------------


def out_of_step(rank: int, world: int, port: str, out: str, timeout_s: float) -> None:
    """Rank 0 enters a collective the other ranks never enter."""
    def body():
        me = Rank(rank, out)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
        if rank == 0:
            me.step("all_gather_object alone")
            dist.all_gather_object([None] * world, "lonely")
        me.step("sleeping")
        time.sleep(600)

    _reporting(rank, out, body)


def stall(rank: int, world: int, port: str, out: str, timeout_s: float) -> None:
    """Every rank stops moving, outside any collective."""
    def body():
        Rank(rank, out).step("sleeping")
        time.sleep(600)

    _reporting(rank, out, body)


def _reporting(rank: int, out: str, body) -> None:
    """Runs `body`; its traceback goes to OUT/rank<RANK>.err, and SIGUSR1
    (sync_world sends it to a rank it is about to stop) writes every
    thread's stack to OUT/rank<RANK>.stack."""
    import faulthandler
    import signal

    stacks = open(os.path.join(out, f"rank{rank}.stack"), "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    try:
        body()
    except BaseException:
        import traceback

        with open(os.path.join(out, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        stacks.close()


if __name__ == "__main__":
    run(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
