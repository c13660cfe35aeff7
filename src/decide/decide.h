// decide/decide.h — stage 3: which values the forward saves.
//
// Contract:
//  * solve_min_cut is torch 2.13's solve_min_cut: the same ban rules, the
//    same capacity graph (split nodes X_in -> X_out weighted by what saving X
//    costs, infinite edges for data dependencies and constraints), an exact
//    max-flow, and the cut torch's networkx call returns (options.cut_side).
//    Saved values come back in graph order. When no finite cut exists it
//    throws NoFiniteCutError explaining the infinite path node by node.
//  * choose_saved_values_set is torch's budget-aware driver: the three
//    min-cut tiers, then a knapsack (budget/knapsack.h, options'
//    activation_memory_budget_solver) over the recomputable banned nodes
//    with runtimes from budget/flops.h, then a min-cut with the chosen nodes
//    unbanned. memory_budget_pareto sweeps that last step over budgets.
//  * default_saved_values is the saved-value selection of default_partition.
// All ids are ids of the prepared graph.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "analyze/analyze.h"
#include "budget/pareto.h"
#include "remat/graph.h"
#include "remat/options.h"
#include "remat/partition.h"

namespace remat {

struct MinCutOptions {
  bool ban_if_used_far_apart = true;
  bool ban_if_long_fusible_chains = true;
  bool ban_if_materialized_backward = true;
  bool ban_if_not_in_allowlist = true;
  bool ban_if_reduction = true;
};
MinCutOptions min_cut_options_from(const PartitionOptions& options);

// Everything solve_min_cut reads, computed once per graph.
struct DecideContext {
  const Graph& graph;
  const NodeInfo& info;
  const std::vector<int64_t>& dist_from_bw;
  const std::vector<uint8_t>& op_categories;  // by OpId (OpRegistry::classify)
  const PartitionOptions& options;
  // Where the decision's story goes (PartitionResult::trace), or null. Set
  // when options.trace or options.visualize_memory_budget_pareto asks.
  PartitionTrace* trace = nullptr;
};

struct MinCutResult {
  std::vector<NodeId> saved_values;  // graph order
  std::vector<NodeId> banned_nodes;  // in the order they were banned
  // Per node: why recomputation was banned (a static string), "" when it
  // was not.
  std::vector<std::string_view> ban_reason;
  // The lines torch's solve_min_cut logs on this graph, in order (only when
  // ctx.trace is set): replayed into the trace each time this cut is used.
  std::vector<LogRecord> log;
};

// `dont_ban` (per node, may be empty) lists nodes the memory budget allows
// to be recomputed; collectives stay banned unless the unsafe option is set.
MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const std::vector<uint8_t>& dont_ban = {});

// torch's choose_saved_values_set. Returns the saved values; `last` (may be
// null) receives the details of the last min-cut that ran (empty when none
// did). Throws Error(kInvalidOption) for a budget outside [0, 1] (or NaN).
std::vector<NodeId> choose_saved_values_set(const DecideContext& ctx, double memory_budget,
                                            MinCutResult* last);

// torch's visualize_memory_budget_pareto sweep: the knapsack stage of
// choose_saved_values_set (items from the fully aggressive cut, whatever the
// budget tiers would have returned) evaluated by pareto_sweep, each point
// (sum(runtimes) - expected_runtime, mem_ratio(saved)) as torch's
// estimate_for_budget. Throws Error(kUnsupported) when the runtime-optimized
// cut saves no more than the inputs (torch never reaches its sweep then).
// A non-empty `budgets` evaluates exactly those budgets, in order, instead.
std::vector<ParetoPoint> memory_budget_pareto(const DecideContext& ctx, double resolution = 1e-3,
                                              std::span<const double> budgets = {});

struct SavedSets {
  std::vector<NodeId> saved_values;
  std::vector<NodeId> saved_sym_nodes;
  std::vector<NodeId> saved_opaque_nodes;
};

// default_partition's selection (the loop over forward nodes). Throws
// Error naming the node where torch asserts. `graph_has_recomputable_ops`
// is torch's has_recomputable_ops(joint_module), taken before tag cleanup:
// 1 or 0, or -1 to compute it from `g`.
SavedSets default_saved_values(const Graph& g, const NodeInfo& info,
                               const PartitionOptions& options,
                               int graph_has_recomputable_ops = -1);

}  // namespace remat
