"""torch.distributed as remat's rank group (torch._functorch.config._sync_decision_cross_ranks).

Contract:
  * `rank_group(joint_module, options)` is None where torch's
    `_sync_decision_cross_ranks` returns before talking to any rank:
    torch.distributed unavailable or not initialized, or a world of one rank
    (the default group's size, as torch's gate reads it). Otherwise a
    TorchRankGroup, which the engine uses when the joint graph has
    functional collectives (remat/sync.h).
  * TorchRankGroup makes exactly torch's calls on the process group the
    reproduced release talks on (switch sync_decision_compile_pg, read from
    the partition's options): the default group up to 2.14; from 2.15 on
    dynamo's compile-sync gloo group (_internals.compile_sync_group(),
    obtained just before the first collective, as torch obtains it after its
    gate; None raises torch's AssertionError). Outside fake mode and dispatch
    as torch, and outside the Python dispatcher (under which a gloo
    collective can deadlock): `all_gather_object` for the graph digest and
    for the saved names (lists sized by that group), `all_reduce(MAX)` of an
    int64 tensor on that group's object-collective device; `rank()` is this
    rank in that group. So ranks running remat and ranks running torch's own partitioner
    (or install()'s fallback to it) stay in step with each other.
  * `target_repr` is Python's str() of the joint graph's callable targets
    (for a Python function it holds an address, which torch up to 2.13
    hashes too); `target_qualified_name` is torch 2.14's stable spelling.
  * `agreed` logs torch's structured-trace artifact
    "aot_joint_graph_sync_decision_cross_ranks" with torch's payload, through
    _trace's trace_artifact (the payload comes formatted from the engine).
  * An exception of a collective is torch.distributed's, not remat's: it is
    marked so the drop-in passes it on unchanged (torch raises it too), and a
    group that has talked to the other ranks is `talked`: falling back to
    torch's partitioner after that would repeat collectives on this rank only.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.fx as fx

from . import _custom, _internals, _release, _trace
from ._targets import target_name

ARTIFACT_NAME = "aot_joint_graph_sync_decision_cross_ranks"
# torch 2.15's words when dynamo has no compile-sync group to give.
NO_COMPILE_SYNC_GROUP = "Compile sync process group must be available here"


def rank_group(joint_module: fx.GraphModule,
               options: Optional[dict] = None) -> Optional["TorchRankGroup"]:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return None
    return TorchRankGroup(joint_module,
                          compile_sync_pg=_release.behaves("sync_decision_compile_pg", options))


class TorchRankGroup:
    """remat's RankGroup interface (remat/sync.h) on torch.distributed."""

    def __init__(self, joint_module: fx.GraphModule, *, compile_sync_pg: bool = False):
        self.talked = False
        self._compile_sync_pg = compile_sync_pg
        self._pg: Any = None  # the compile-sync group, once obtained
        self._targets: dict[str, tuple[str, str]] = {}  # name -> (str(), qualified)
        for node in joint_module.graph.nodes:
            t = node.target
            if node.op == "call_function" and not isinstance(
                    t, (_internals.OpOverload, _internals.HigherOrderOperator)):
                self._targets.setdefault(target_name(t),
                                         (str(t), _internals.stable_target_str(t)))

    # --- what the engine calls ---------------------------------------------
    def rank(self) -> int:
        import torch.distributed as dist

        # Asked once the lists are gathered, so the group is known by then.
        return self._pg.rank() if self._pg is not None else dist.get_rank()

    def world_size(self) -> int:
        import torch.distributed as dist

        # torch's gate: the default group's size, in every release.
        return dist.get_world_size()

    def all_gather(self, obj: Any) -> list:
        import torch.distributed as dist

        def gather(pg: Any) -> list:
            out = [None for _ in range(pg.size() if pg is not None else dist.get_world_size())]
            dist.all_gather_object(out, obj, group=pg)
            return out

        return self._collective(gather)

    def all_reduce_max(self, sizes: list) -> list:
        import torch.distributed as dist

        def reduce(pg: Any) -> list:
            t = torch.tensor(sizes, device=_internals.object_collective_device(pg))
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=pg)
            return [int(x) for x in t.tolist()]

        return self._collective(reduce)

    def target_repr(self, qualified: str) -> str:
        # Every callable target of the joint graph is known; the engine's own
        # spelling stands in for anything else.
        known = self._targets.get(qualified)
        return known[0] if known else f"<function {qualified}>"

    def target_qualified_name(self, qualified: str) -> str:
        known = self._targets.get(qualified)
        return known[1] if known else qualified

    def agreed(self, picked_rank: int, payload: str) -> None:
        _trace.trace_artifact(ARTIFACT_NAME, "string", lambda: payload)

    # -------------------------------------------------------------------------
    def _process_group(self) -> Any:
        """The group torch's sync talks on; None is the default group."""
        if self._compile_sync_pg and self._pg is None:
            pg = _internals.compile_sync_group()
            if pg is None:
                raise AssertionError(NO_COMPILE_SYNC_GROUP)
            self._pg = pg
        return self._pg

    def _collective(self, fn: Callable[[Any], Any]) -> Any:
        try:
            pg = self._process_group()
            self.talked = True
            # As torch: outside dispatch and fake mode. And outside the
            # Python dispatcher, or gloo may deadlock (_internals says why):
            # the same collectives, in the same order, only safely made.
            with _internals.no_dispatch(), _internals.fake_tensor().unset_fake_temporarily(), \
                    _internals.no_python_dispatcher():
                return fn(pg)
        except Exception as e:
            setattr(e, _custom.USER_CODE_MARK, True)
            raise
