"""torch.distributed as remat's rank group (torch._functorch.config._sync_decision_cross_ranks).

Contract:
  * `rank_group(joint_module)` is None where torch's `_sync_decision_cross_ranks`
    returns before talking to any rank: torch.distributed unavailable or not
    initialized, or a world of one rank. Otherwise a TorchRankGroup, which the
    engine uses when the joint graph has functional collectives (remat/sync.h).
  * TorchRankGroup makes exactly torch's calls on the default group, outside
    fake mode and dispatch as torch does: `all_gather_object` for the graph
    digest and for the saved names, `all_reduce(MAX)` of an int64 tensor on the
    object-collective device. So ranks running remat and ranks running torch's
    own partitioner stay in step with each other.
  * `target_repr` is Python's str() of the joint graph's callable targets
    (for a Python function it holds an address, which torch hashes too).
  * `agreed` logs torch's structured-trace artifact
    "aot_joint_graph_sync_decision_cross_ranks" with torch's payload, through
    _trace's trace_artifact (the payload comes formatted from the engine).
  * An exception of a collective is torch.distributed's, not remat's: it is
    marked so the drop-in passes it on unchanged (torch raises it too), and a
    group that has talked to the other ranks is `talked`: falling back to
    torch's partitioner after that would repeat collectives on this rank only.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.fx as fx

from . import _custom, _trace
from ._targets import target_name

ARTIFACT_NAME = "aot_joint_graph_sync_decision_cross_ranks"


def rank_group(joint_module: fx.GraphModule) -> Optional["TorchRankGroup"]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return None
    return TorchRankGroup(joint_module)


class TorchRankGroup:
    """remat's RankGroup interface (remat/sync.h) on torch.distributed's default group."""

    def __init__(self, joint_module: fx.GraphModule):
        self.talked = False
        self._targets: dict[str, str] = {}
        for node in joint_module.graph.nodes:
            t = node.target
            if node.op == "call_function" and not isinstance(
                    t, (torch._ops.OpOverload, torch._ops.HigherOrderOperator)):
                self._targets.setdefault(target_name(t), str(t))

    # --- what the engine calls ---------------------------------------------
    def rank(self) -> int:
        import torch.distributed as dist

        return dist.get_rank()

    def world_size(self) -> int:
        import torch.distributed as dist

        return dist.get_world_size()

    def all_gather(self, obj: Any) -> list:
        import torch.distributed as dist

        def gather():
            out = [None for _ in range(dist.get_world_size())]
            dist.all_gather_object(out, obj)
            return out

        return self._collective(gather)

    def all_reduce_max(self, sizes: list) -> list:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        def reduce():
            t = torch.tensor(sizes, device=c10d._get_object_coll_device())
            dist.all_reduce(t, op=c10d.ReduceOp.MAX)
            return [int(x) for x in t.tolist()]

        return self._collective(reduce)

    def target_repr(self, qualified: str) -> str:
        # Every callable target of the joint graph is known; the engine's own
        # spelling stands in for anything else.
        return self._targets.get(qualified, f"<function {qualified}>")

    def agreed(self, picked_rank: int, payload: str) -> None:
        _trace.trace_artifact(ARTIFACT_NAME, "string", lambda: payload)

    # -------------------------------------------------------------------------
    def _collective(self, fn):
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.utils._mode_utils import no_dispatch

        self.talked = True
        try:
            with no_dispatch(), unset_fake_temporarily():
                return fn()
        except Exception as e:
            setattr(e, _custom.USER_CODE_MARK, True)
            raise
