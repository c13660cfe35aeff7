// remat/partition.h — the partitioners: joint graph in, forward and backward
// graphs out (the types they take and fill are remat/result.h's).
//
// Contract: for the same joint graph and options, the saved values (names and
// order) and the forward/backward graphs equal what the options' torch
// release's `min_cut_rematerialization_partition` / `default_partition`
// return (options.torch, remat/torch_release.h).
// Neither function modifies its input: the graphs they return use string
// and value pools layered over the joint graph's (Graph::layer_pools), which
// they only read, so their StrIds and value indices agree with the joint
// graph's and the joint graph's pools do not grow. Thread safety: any number
// of calls (memory_budget_pareto included) may run concurrently on one
// JointGraph, or on copies of it; nothing may append to the joint graph's
// pools meanwhile (a GraphBuilder made from it, or the builder that built it
// reused). Results are independent of one another and of the joint graph's
// lifetime. Errors are remat::Error; a graph with no finite cut raises
// NoFiniteCutError with the conflicting path explained.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "remat/graph.h"
#include "remat/options.h"
#include "remat/result.h"

namespace remat {

// The one-call partitioners: plan, agree across ranks when the options ask
// for it (sync_decision_cross_ranks with a rank_group of more than one rank;
// see remat/sync.h), emit.
PartitionResult min_cut_rematerialization_partition(const JointGraph& joint,
                                                    const PartitionOptions& options);
PartitionResult default_partition(const JointGraph& joint,
                                  const PartitionOptions& options);

// --- The stage boundary between deciding and extracting --------------------
//
// A partition stopped after its decision: what torch's pipeline holds where
// `_sync_decision_cross_ranks` may replace the saved values. The one-call
// functions above are plan + emit; a caller that needs to look at or change
// the decision in between (ranks agreeing on one, a what-if study) calls the
// two steps itself. A plan owns everything it needs (it does not refer to the
// JointGraph it came from) and is moved into emit_partition, once.
class PartitionPlan {
 public:
  PartitionPlan(PartitionPlan&&) noexcept;
  PartitionPlan& operator=(PartitionPlan&&) noexcept;
  ~PartitionPlan();

  // The decision torch's cross-rank sync exchanges, as ids of the input joint
  // graph, in torch's order:
  //  * "min_cut": every value choose_saved_values_set picked (tensors, sym
  //    nodes and opaque values together, before extraction splits them);
  //  * "default": the saved tensors only (its sym nodes and opaque values
  //    stay as decided, as in torch).
  // Under remat's peak_memory_budget the search decides by building
  // candidates, so the plan is built already: saved() is the chosen plan's
  // saved tensors, then sym nodes, then opaque values; emit_partition(plan)
  // returns that build, and a replacement rebuilds as for a min-cut plan.
  // The one-call functions sync such a plan as torch's decision (ranks of
  // one job must run one plan): a rank whose own list is not the one
  // picked rebuilds the picked one, its peak_search summary kept but no
  // longer `optimal`, and its peak may then exceed its own limit.
  const std::vector<NodeId>& saved() const;
  // Which partitioner decided: "min_cut" or "default". Not always the one
  // called: the min-cut hands graphs whose backward needs nothing to the
  // default partitioner, and the default hands non-functional graphs with
  // recompute tags to the min-cut, as torch does.
  const char* partitioner() const;
  // The joint graph as it was decided on: after the prepare passes (for the
  // min-cut DCE and CSE, then the recompute-tag and force-save passes). Each
  // node's `origin` is its id in the input joint graph. Cross-rank agreement
  // hashes and names this graph, as torch hashes its own.
  const Graph& prepared() const;
  // The options the plan was made with, without the custom solver and
  // estimator hooks (deciding is over) and without the rank group. The
  // hooks the stages after the decision call stay (progress,
  // offload_node_runtime, activation_quantization.symbolic_size), so they
  // must outlive the plan.
  const PartitionOptions& options() const;

  struct State;  // the pipeline's intermediate data (src/pipeline/)

 private:
  friend class PlanAccess;  // the pipeline's, which makes and emits plans
  explicit PartitionPlan(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The pipeline up to and including the decision (prepare, analyze, decide).
// Validates the options and the graph as the one-call functions do, and
// throws the same errors; never talks to other ranks.
PartitionPlan plan_min_cut_rematerialization_partition(const JointGraph& joint,
                                                       const PartitionOptions& options);
PartitionPlan plan_default_partition(const JointGraph& joint, const PartitionOptions& options);

// The rest of the pipeline (extract, rewrite) on the plan's own decision.
PartitionResult emit_partition(PartitionPlan plan);
// The same with the decision replaced by `saved` (ids of the input joint
// graph, in the order torch would pass them on; the meaning of
// PartitionPlan::saved). Each must be a node of the prepared graph that the
// forward can compute: not removed by DCE or CSE, not the output node, not
// computed from a tangent or a backward seed, at most once; for a "default"
// plan, a value that is neither a sym node nor an opaque one. Anything else
// is Error(kInvalidOption) naming the node. What is not saved is recomputed
// in the backward, as for any decision.
PartitionResult emit_partition(PartitionPlan plan, std::vector<NodeId> saved);

// torch's visualize_memory_budget_pareto sweep (choose_saved_values_set's
// estimate_for_budget, bisected over [0, 1] down to `resolution`), with the
// options' knapsack solver and runtime estimator. Points are sorted by
// (budget, runtime, ratio), duplicates included, as torch's list. Throws
// Error(kUnsupported) for graphs where no budget changes the partition.
// A non-empty `budgets` evaluates exactly those budgets, in order, instead
// of sweeping (each must be in [0, 1]).
std::vector<MemoryBudgetPoint> memory_budget_pareto(const JointGraph& joint,
                                                    const PartitionOptions& options,
                                                    double resolution = 1e-3,
                                                    const std::vector<double>& budgets = {});

// The activation budgets `remat report` (and remat.plans() by default)
// builds torch's plans at: few, since each is one build of the whole step.
inline constexpr double kPlanBudgets[] = {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1};

// One plan, built and measured: torch's (budget_plans: what its
// activation-memory-budget logic makes for a graph) or remat's own
// (peak_frontier); what `remat report` and `remat pareto --peak` draw.
struct BudgetPlanPoint {
  std::string label;             // "runtime-optimized", "knapsack 0.5", "exact <= 20.31 KiB", ...
  int64_t peak_bytes = 0;        // simulated peak of the step (remat/memory.h)
  double recompute_runtime = 0;  // estimated runtime of what the backward recomputes
  size_t saved_values = 0;       // tensors saved
  int64_t limit_bytes = 0;       // peak_frontier: the peak limit it was planned for; else 0
};

// The distinct plans choose_saved_values_set returns as the activation
// budget goes from 1 to 0 (the runtime-optimized cut, the two aggressive
// tiers, the knapsack at each of `budgets` (in (0, 1), descending), then
// budget 0), each built as the min-cut partitioner builds its plan and
// simulated; a saved set met before is skipped. One build per plan: on big
// graphs give few budgets. options.progress hears "plans" after each.
// Throws Error(kUnsupported) when the backward needs nothing from the
// forward (torch hands such graphs to the default partitioner).
std::vector<BudgetPlanPoint> budget_plans(const JointGraph& joint, const PartitionOptions& options,
                                          const std::vector<double>& budgets);

// remat's own trade-off between peak memory and recompute: the plans its
// optimizer (options.peak_search, fast or exact; torch_plans is
// Error(kInvalidOption): that search is torch's plans, which budget_plans
// draws) returns at `points` (>= 2, else Error(kInvalidOption)) peak limits
// spaced evenly from the runtime-optimized plan's simulated peak (budget_plans'
// first) down to the smallest peak the optimizer reaches (what it reports,
// BudgetUnreachableError::smallest_peak, when asked for 1 byte). Each plan
// is exactly what min_cut_rematerialization_partition returns with
// options.peak_memory_budget = its limit (the options' own limit is not
// read), so it fits that limit and has no mutation hazard. A limit the
// search cannot meet (fast is a heuristic; exact may run out of
// peak_search_nodes) gives no point. A plan met at several limits (the
// same saved values, or the same peak and recompute) is one point: the
// plan the smallest of them gives, with that limit (limit_bytes). Sorted
// by peak, then recompute; labelled "fast <= 1.25 MiB" / "exact <= ...".
// With exact (each search proven optimal within its nodes), no valid plan
// without a mutation hazard whose peak fits a point's limit, torch's budget
// plans included, recomputes less than that point. One optimizer run per
// limit, plus one for the bottom and one build for the top:
// options.progress hears "frontier" after each. Throws Error(kUnsupported)
// when the backward needs nothing from the forward, as budget_plans does,
// and BudgetUnreachableError when no valid plan is found at all.
std::vector<BudgetPlanPoint> peak_frontier(const JointGraph& joint, const PartitionOptions& options,
                                           int points);

}  // namespace remat
