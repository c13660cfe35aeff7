// remat/options.h — every knob of the partitioner.
//
// Contract: one field per flag the reference reads from
// torch._functorch.config (same name, same default as torch 2.13), plus the
// few facts torch takes from its runtime (whether the DCE treats random ops
// as impure, whether torch.distributed is available), plus remat's own
// choices, which default to torch's behavior. The Python front door fills
// these from torch's config at call time.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/ops.h"

namespace remat {

// Which minimum cut to return when several have the same cost.
enum class CutSide : uint8_t {
  // The cut nearest the sink: the sink side is exactly the nodes that can
  // still reach the sink in the residual graph. networkx's minimum_cut,
  // which torch 2.13 calls, returns this one.
  kSinkMinimal,
  // The cut nearest the source: the source side is the nodes reachable
  // from the source in the residual graph.
  kSourceMinimal,
};

// torch's CustomKnapsackSolver, as the engine calls it. `memory` holds the
// knapsack items' normalized sizes, `banned_nodes` the items themselves as
// joint-graph NodeIds (the caller's ids), both in torch's item order (largest
// first); `max_memory` is the budget. Returns (saved, recomputed) item
// indices. Only `recomputed` is used, as in torch: an index outside
// [0, memory.size()) is skipped (torch's caller swallows the IndexError;
// Python's negative indices are normalized by the front door). The expected
// runtime is 0, as torch reports it. Exceptions propagate out of the
// partition call unchanged.
using CustomKnapsackFn = std::function<std::pair<std::vector<int>, std::vector<int>>(
    const std::vector<double>& memory, double max_memory, const std::vector<NodeId>& banned_nodes)>;

// torch's CustomRuntimeEstimator: the runtime of recomputing one knapsack
// item, given as its joint-graph NodeId. Called once per item, in item
// order, before the solver. Exceptions propagate unchanged.
using CustomRuntimeEstimatorFn = std::function<double(NodeId joint_node)>;

struct PartitionOptions {
  // --- torch._functorch.config -------------------------------------------
  bool cse = true;
  bool unsafe_allow_optimization_of_collectives = false;
  bool recompute_views = false;
  int max_dist_from_bw = 1000;
  bool ban_recompute_used_far_apart = true;
  bool ban_recompute_long_fusible_chains = true;
  bool ban_recompute_materialized_backward = true;
  bool ban_recompute_not_in_allowlist = true;
  bool ban_recompute_reductions = true;
  bool aggressive_recomputation = false;
  bool treat_parameters_as_free_to_save = true;
  bool is_non_builtin_to_include = false;
  bool unsafe_treat_script_objects_as_zero_size = false;
  bool graphsafe_rng_functionalization = true;
  double activation_memory_budget = 1.0;
  // A torch solver name, or "custom" for `custom_knapsack` below.
  std::string activation_memory_budget_solver = "dp";
  // A torch estimator name, or "custom" for `custom_runtime_estimator`.
  std::string activation_memory_budget_runtime_estimator = "flops";
  // Rewrites torch applies after extraction that remat does not reproduce
  // yet; validate() rejects them with kUnsupported rather than ignore them.
  bool enable_activation_offloading = false;  // config.enable_activation_offloading
  bool sync_decision_cross_ranks = false;     // config._sync_decision_cross_ranks
  // inductor post_grad_fusion_options["activation_quantization_aten_pass"]
  bool activation_quantization = false;

  // --- facts torch reads from its runtime --------------------------------
  // Graph.eliminate_dead_code treats random ops as impure unless a tracing
  // context exists, in which case inductor's fallback_random decides.
  bool dce_impure_random = true;
  // torch.distributed.is_available(): enables the wait_tensor rules.
  bool distributed_available = true;

  // --- remat's own -------------------------------------------------------
  CutSide cut_side = CutSide::kSinkMinimal;
  // Measured runtimes for activation_memory_budget_runtime_estimator =
  // "profile", indexed by joint-graph NodeId (torch benchmarks each node
  // itself; remat takes the times from its caller). Read only by "profile".
  std::vector<double> profiled_runtimes;
  // Used when the solver / estimator above is "custom" (validate() requires
  // them then); ignored otherwise. Called on the partitioning thread.
  CustomKnapsackFn custom_knapsack;
  CustomRuntimeEstimatorFn custom_runtime_estimator;
  // Record PartitionResult::trace: the lines torch's partitioner would log,
  // the knapsack's inputs and choices, saved sizes. Off: no cost.
  bool trace = false;
  // torch's config.visualize_memory_budget_pareto: when the budget reaches
  // the knapsack, also sweep the budget / recompute-runtime frontier into
  // PartitionResult::trace.pareto (torch draws it at that point).
  bool visualize_memory_budget_pareto = false;
  // Told how far long work has come: `task` ("partition", "pareto") and a
  // fraction in [0, 1] that never decreases within one call. Called on the
  // partitioning thread; null: nothing is reported.
  std::function<void(std::string_view task, double fraction)> progress;
  // Op categories; defaults to torch 2.13's lists.
  OpRegistry ops = OpRegistry::defaults();

  // Throws Error(kInvalidOption) naming the field when out of range, and
  // Error(kUnsupported) naming it when it asks for what remat cannot do yet.
  void validate() const;
};

}  // namespace remat
