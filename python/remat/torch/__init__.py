"""remat.torch: the PyTorch front door (FX joint graphs <-> format v1).

Contract:
  export_joint_graph(gm, num_fwd_outputs, static_lifetime_input_indices=None,
                     *, as_json=False, handles=None) -> dict | bytes
  import_graph(doc, joint_gm=None, handles=None, *, trusted=False) -> fx.GraphModule
  import_result(result_doc, joint_gm, handles=None, *, trusted=False)
      -> (fw_module, bw_module); a file's targets resolve only to torch's
      operators unless trusted (docs/format.md "Trust")
  capture() / CaptureSession / save_capture(path, session)
  min_cut_rematerialization_partition / default_partition: torch's signatures
  partition(gm, *, num_fwd_outputs, ...) -> Partition(forward, backward, result)
  install() / uninstall(): make torch.compile use remat
  simulate_memory(forward, backward, num_fwd_outputs=None, memory_model="aten",
                  inductor_reorder=True) -> dict:
      the simulated peak memory of any forward/backward pair (torch's plans too)
  peak_memory_budget(nbytes, search="fast", seconds=None, backward_order="autograd",
                     memory_model="auto", nodes=None) /
  set_peak_memory_budget(nbytes, search=..., seconds=..., backward_order=..., memory_model=...,
                         nodes=...) /
  get_peak_memory_budget() -> int / get_peak_search() -> PeakSearchSetting /
  get_backward_order() -> str / get_memory_model() -> str:
      remat's own peak-memory limit for its partitioners (torch's config
      untouched) and how its plan is searched: "fast" (the default) or
      "exact" (remat's optimizer over every valid plan;
      "exact" searches for the least recompute within `nodes` solver nodes and
      says whether it proved it, docs/memory.md), or "torch_plans" (torch's
      budget plans, then repairs); Partition.peak_search is
      the result's summary of that search. backward_order="memory" (with
      or without a limit) reorders the backward where that lowers the
      simulated peak; memory_model="auto" counts the peak as inductor's
      generated code allocates for graphs inductor compiles (install()),
      op by op otherwise
  set_torch_release("nearest" | "2.14" | None): opt in to running under a torch
      outside the supported releases (docs/torch-releases.md)
The drop-in reproduces the running torch's release (2.11 to 2.15), each with
its own decisions; see _release.
Importing this package imports torch; `import remat` alone does not.

Parity with torch's partitioners holds for every option they read, with one
deliberate difference: activation_memory_budget_solver="ilp". torch solves
that knapsack with scipy.optimize.milp (HiGHS, 1e-4 relative MIP gap); remat
solves it exactly, so its choice recomputes no more runtime than torch's, but
on ties (or within HiGHS' gap) it may save another set than torch. The "dp"
solver (torch's default) gives node-for-node parity.

config._sync_decision_cross_ranks: under an initialized torch.distributed
group of several ranks, the drop-in agrees with the other ranks through
torch.distributed exactly as the running release does (_ranks.TorchRankGroup:
the same collectives on the same process group, the default one up to 2.14,
dynamo's compile-sync group from 2.15), so ranks running remat and ranks
running torch agree, and logs the same structured-trace artifact and debug
line; otherwise it changes nothing, as in torch.
"""

from ._capture import CapturedJoint, CaptureSession, capture, save_capture
from ._dropin import (
    Partition,
    RematHazardWarning,
    default_partition,
    install,
    installed,
    min_cut_rematerialization_partition,
    options_from_torch,
    partition,
    uninstall,
)
from ._fx_to_json import export_graph_nodes, export_joint_graph
from ._memory import (
    PeakSearchSetting,
    get_backward_order,
    get_memory_model,
    get_peak_memory_budget,
    get_peak_search,
    peak_memory_budget,
    set_peak_memory_budget,
    simulate_memory,
)
from ._json_to_fx import import_graph, import_result
from ._release import set_torch_release
from ._targets import resolve_target, target_name

__all__ = [
    "min_cut_rematerialization_partition",
    "default_partition",
    "partition",
    "Partition",
    "options_from_torch",
    "install",
    "uninstall",
    "installed",
    "export_joint_graph",
    "export_graph_nodes",
    "import_graph",
    "import_result",
    "capture",
    "CaptureSession",
    "CapturedJoint",
    "save_capture",
    "target_name",
    "resolve_target",
    "simulate_memory",
    "peak_memory_budget",
    "set_peak_memory_budget",
    "get_peak_memory_budget",
    "get_peak_search",
    "get_backward_order",
    "get_memory_model",
    "PeakSearchSetting",
    "RematHazardWarning",
    "set_torch_release",
]
