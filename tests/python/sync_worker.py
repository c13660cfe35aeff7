"""One rank of test_sync_multiprocess.py: `python sync_worker.py RANK WORLD PORT OUT`.

Joins a gloo group on 127.0.0.1:PORT, captures joint graphs with functional
collectives (sync_models), then runs every scenario with torch's partitioner
and with remat's under the same per-rank config, recording graphs, the
collectives each sent and the sync artifacts (sync_models.run). Ranks are made
to disagree: different memory budgets, different runtime estimates, different
shard shapes. Every rank runs the same sequence, so the collectives line up;
writes OUT/rank<RANK>.json.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch._inductor.custom_graph_pass import CustomRuntimeEstimator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sync_models as sm  # noqa: E402

BUDGETS = [0.05, 0.6, 0.2, 1.0]


class RankSkewedEstimator(CustomRuntimeEstimator):
    """Runtimes that differ per rank: each rank's knapsack prefers other nodes."""

    def __init__(self, rank: int):
        self.rank = rank

    def __call__(self, node) -> float:
        return float(1 + (sum(map(ord, node.name)) * (self.rank + 3)) % 11)

    def uuid(self):
        return None


def main() -> None:
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    joints = {
        "mlp": sm.capture("mlp", *sm.mlp_allreduce(width=32, depth=6)),
        "shards": sm.capture("shards", *sm.fsdp_like(width=16, batch=4 + 8 * rank)),
        "differ": sm.capture("differ", *sm.extra_op_on(1)),
        "none": sm.capture("none", *sm.no_collectives()),
    }
    budget = {"activation_memory_budget": BUDGETS[rank % len(BUDGETS)]}
    scenarios = [
        ("budgets", "mlp", "min_cut", budget),
        ("estimates", "mlp", "min_cut", {
            "activation_memory_budget": 0.3,
            "activation_memory_budget_runtime_estimator": RankSkewedEstimator(rank)}),
        ("shards", "shards", "min_cut", budget),
        ("default", "mlp", "default", {}),
        ("graphs_differ", "differ", "min_cut", budget),
        ("no_collectives", "none", "min_cut", budget),
    ]
    results: dict = {}
    for label, joint, kind, config in scenarios:
        theirs_fn, ours_fn = sm.partitioners(kind)
        results[label] = {
            "unsynced": dataclasses.asdict(sm.run(theirs_fn, joints[joint], **config)),
            "torch": dataclasses.asdict(
                sm.run(theirs_fn, joints[joint], _sync_decision_cross_ranks=True, **config)),
            "remat": dataclasses.asdict(
                sm.run(ours_fn, joints[joint], _sync_decision_cross_ranks=True, **config)),
        }
    # Even ranks run remat, odd ranks torch, at the same time: they talk to
    # each other through the same collectives and must agree all the same.
    theirs_fn, ours_fn = sm.partitioners("min_cut")
    mixed_fn = ours_fn if rank % 2 == 0 else theirs_fn
    results["mixed"] = dataclasses.asdict(
        sm.run(mixed_fn, joints["mlp"], _sync_decision_cross_ranks=True, **budget))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f, default=repr)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
