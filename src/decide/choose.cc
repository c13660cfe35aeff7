// decide/choose.cc — choose_saved_values_set: the memory-budget driver of the
// min-cut partitioner, up to where it needs the knapsack solvers.
//
// Budget 0 saves the inputs; budget 1 is the runtime-optimized min-cut. In
// between, torch tries progressively more aggressive min-cuts and returns the
// first whose activation memory ratio is under the budget; only when none is
// does it run a knapsack over the recomputable banned nodes. Those early exits
// are here; the knapsack itself is not built yet and raises kUnsupported.
#include <cmath>
#include <unordered_set>

#include "decide/decide.h"
#include "decide/rules.h"
#include "remat/error.h"

namespace remat {
namespace {

// sum(map(_size_of, values)) / 1e9 — an exact integer sum, then a float
// division, as Python does.
double activations_size(const DecideContext& ctx, const std::vector<NodeId>& values) {
  __int128 total = 0;
  for (NodeId n : values) total += size_of(ctx.graph, n, ctx.options);
  return static_cast<double>(total) / 1e9;
}

// torch._inductor.fx_utils.get_node_storage; kNoStorage for None.
constexpr int64_t kNoStorage = std::numeric_limits<int64_t>::min();
int64_t node_storage(const Graph& g, NodeId n) {
  if (g.node(n).value != ValueKind::kTensor) return kNoStorage;
  auto ts = g.tensors(n);
  if (ts.empty() || ts[0].storage < 0) return kNoStorage;
  return ts[0].storage;
}

}  // namespace

std::vector<NodeId> choose_saved_values_set(const DecideContext& ctx, double memory_budget,
                                            MinCutResult* last) {
  if (!(memory_budget >= 0 && memory_budget <= 1))
    throw Error(ErrorCode::kInvalidOption,
                "activation_memory_budget: the valid ranges for memory budget are 0 <= m <= 1. "
                "The provided value is " + std::to_string(memory_budget));
  const PartitionOptions& o = ctx.options;
  MinCutOptions mc = min_cut_options_from(o);
  if (o.aggressive_recomputation) {
    mc.ban_if_used_far_apart = false;
    mc.ban_if_long_fusible_chains = false;
    mc.ban_if_materialized_backward = false;
    mc.ban_if_not_in_allowlist = false;
  }
  MinCutResult local;
  MinCutResult& out = last ? *last : local;
  out = MinCutResult();
  if (memory_budget == 0) return ctx.info.inputs;

  out = solve_min_cut(ctx, mc);
  if (memory_budget == 1) return out.saved_values;
  std::vector<NodeId> runtime_optimized = out.saved_values;

  const double min_act = activations_size(ctx, ctx.info.inputs);
  const double max_act = activations_size(ctx, runtime_optimized);
  if (max_act <= min_act) return runtime_optimized;
  auto mem_ratio = [&](const std::vector<NodeId>& v) {
    return (activations_size(ctx, v) - min_act) / (max_act - min_act);
  };

  MinCutOptions more = mc;
  more.ban_if_used_far_apart = false;
  more.ban_if_long_fusible_chains = false;
  more.ban_if_materialized_backward = false;
  out = solve_min_cut(ctx, more);
  if (mem_ratio(out.saved_values) < memory_budget) return out.saved_values;

  MinCutOptions aggressive = more;
  aggressive.ban_if_not_in_allowlist = false;
  out = solve_min_cut(ctx, aggressive);
  if (mem_ratio(out.saved_values) < memory_budget) return out.saved_values;

  // Banned nodes the knapsack could choose to recompute.
  const Graph& g = ctx.graph;
  std::unordered_set<int64_t> input_storages;
  for (NodeId n : ctx.info.inputs) input_storages.insert(node_storage(g, n));
  std::vector<NodeId> must_save, recomputable;
  for (NodeId n : out.banned_nodes) {
    if (!(ctx.dist_from_bw[n] < kFarFromBackward)) continue;
    if (input_storages.count(node_storage(g, n)) && !is_non_builtin_to_include(g, n, o)) continue;
    if (g.node(n).recompute == RecomputePolicy::kMustSave)
      must_save.push_back(n);
    else
      recomputable.push_back(n);
  }
  if (recomputable.empty()) {
    std::vector<NodeId> result = ctx.info.inputs;
    result.insert(result.end(), must_save.begin(), must_save.end());
    return result;
  }
  throw Error(ErrorCode::kUnsupported,
              "memory budgets between 0 and 1 need the knapsack solvers (budget/), not built yet");
}

}  // namespace remat
