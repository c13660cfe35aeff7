"""One rank of test_sync_multiprocess.py: `run(rank, world, port, out)`, or
`python sync_worker.py RANK WORLD PORT OUT` by hand.

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


def compiled_under_install(rank: int, budget: dict) -> dict:
    """torch.compile (aot_eager) of the all-reduce MLP under
    remat.torch.install(fallback=False) with the sync flag and this rank's
    budget: it must compile without raising, agree with the other ranks
    (one artifact, through remat's engine) and compute eager's gradients."""
    import remat
    import remat.torch as rt

    fn, inputs = sm.mlp_allreduce(width=16, depth=4)
    eager_inputs = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    fn(*eager_inputs).backward()
    engine_groups: list = []
    artifacts: list = []
    real = remat.partition
    remat.partition = lambda *a, **k: engine_groups.append(k.get("rank_group") is not None) or \
        real(*a, **k)
    torch._dynamo.reset()
    rt.install(fallback=False)
    try:
        import torch._functorch.config as fconfig

        with fconfig.patch(_sync_decision_cross_ranks=True, enable_autograd_cache=False,
                           **budget), sm.recording([], artifacts):
            loss = torch.compile(fn, backend="aot_eager")(*inputs)
            loss.backward()
    finally:
        rt.uninstall()
        remat.partition = real
        torch._dynamo.reset()
    grads_equal = all(torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-6)
                      for a, b in zip(inputs, eager_inputs) if a.requires_grad)
    return {"engine_groups": engine_groups, "artifacts": artifacts, "grads_equal": grads_equal}


def run(rank: int, world: int, port: str, out: str) -> None:
    """Writes OUT/rank<RANK>.json, or OUT/rank<RANK>.err with the traceback."""
    try:
        _run(rank, world, port, out)
    except BaseException:
        import traceback

        with open(os.path.join(out, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise


def _run(rank: int, world: int, port: str, out: str) -> None:
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)  # ranks share this machine's cores
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
    if world == 2:  # once is enough: torch.compile costs seconds per rank
        results["compiled"] = compiled_under_install(rank, budget)
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(results, f, default=repr)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    run(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
