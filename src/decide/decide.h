// decide/decide.h — stage 3: which values the forward saves.
//
// Contract:
//  * solve_min_cut is torch 2.13's solve_min_cut: the same ban rules
//    (ban_rules.h), the same capacity graph (split nodes X_in -> X_out
//    weighted by what saving X costs, infinite edges for data dependencies
//    and constraints), an exact
//    max-flow, and the cut torch's networkx call returns (options.cut_side).
//    Saved values come back in graph order. When no finite cut exists it
//    throws NoFiniteCutError explaining the infinite path node by node.
//  * choose_saved_values_set is torch's budget-aware driver: the three
//    min-cut tiers, then a knapsack (budget/knapsack.h, options'
//    activation_memory_budget_solver) over the recomputable banned nodes
//    with runtimes from budget/flops.h, then a min-cut with the chosen nodes
//    unbanned. memory_budget_pareto sweeps that last step over budgets.
//  * resolve_memory_budget picks the budget a joint graph asks for (torch's
//    per-graph and region annotations over the option).
//  * default_saved_values is the saved-value selection of default_partition;
//    split_saved_values splits the min-cut's choice by kind, as torch does
//    after its cross-rank sync.
// All ids are ids of the prepared graph.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyze/analyze.h"
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

class CutMemo;  // decide/cut_memo.h

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
  // Record each node's story in the cuts (MinCutResult's capacity, tie,
  // lifted, ban_detail, and choose_saved_values_set's budget fields): what
  // NodeDecision::why reads. Set for the one decision a partition reports,
  // traced or not, so its reasons never depend on the trace; implied by
  // `trace`.
  bool story = false;
  // What one cut over this context computes that the next would compute
  // alike (decide/cut_memo.h), or null: set by a search that cuts many times.
  CutMemo* memo = nullptr;
};

// What the min-cut reads about a prepared graph beyond the graph and the
// options, owned: the prologue min_cut_rematerialization_partition and the
// Pareto frontier share. dist_from_bw and op_categories are computed only
// when the backward needs something from the forward (has_cut()); torch
// hands other graphs to the default partitioner.
struct MinCutInputs {
  NodeInfo info;
  std::vector<int64_t> dist_from_bw;
  std::vector<uint8_t> op_categories;  // by OpId (OpRegistry::classify)

  bool has_cut() const { return info.num_required_bw > 0; }
  // A context over these inputs (which must outlive it) and `g`.
  DecideContext context(const Graph& g, const PartitionOptions& options,
                        PartitionTrace* trace = nullptr) const {
    return {g, info, dist_from_bw, op_categories, options, trace};
  }
};
// classify_nodes on the prepared graph `g` of `joint`, then the rest when
// the backward needs anything.
MinCutInputs min_cut_inputs(const Graph& g, const JointGraph& joint,
                            const PartitionOptions& options);

// The activation memory budget of one joint graph (prepared as `g`, with
// its classification `info`), in torch's increasing precedence: the global
// option; the first node whose meta["memory_budget"] is a float; the
// region_activation_memory_budget annotation, which every annotated node
// must agree on and which must cover every forward call_function. The
// graph modules nested in the joint module (HOP bodies, `nested`) count
// too: their annotations join the agreement check, and any call_function of
// theirs without one is uncovered. Throws Error(kInvalidGraph) naming the
// node for a per-graph budget outside [0, 1] (ops/memory_budget.h), and
// with torch's messages for conflicting or partial region annotations.
double resolve_memory_budget(const Graph& g, const std::vector<NestedGraph>& nested,
                             const NodeInfo& info, const PartitionOptions& options);

struct MinCutResult {
  std::vector<NodeId> saved_values;  // graph order
  std::vector<NodeId> banned_nodes;  // in the order they were banned
  // Per node: why recomputation was banned (a static string), "" when it
  // was not.
  std::vector<std::string_view> ban_reason;
  // The lines torch's solve_min_cut logs on this graph, in order (only when
  // ctx.trace is set): replayed into the trace each time this cut is used.
  std::vector<LogRecord> log;
  // The story of each node, for NodeDecision's why (only when ctx.trace is
  // set, else empty): the capacity the cut weighed on its X_in -> X_out edge
  // (kNoCapacity when it has none: tied to the backward, or no network
  // vertex); why it was tied to the sink, needing the backward to compute
  // it ("" if not); and the ban the memory budget's dont_ban lifted ("" if
  // none). All three views are of static strings.
  static constexpr int64_t kNoCapacity = -1;
  std::vector<int64_t> capacity;
  std::vector<std::string_view> tie;
  std::vector<std::string_view> lifted;
  // Traced: what the ban rule measured ("12 nodes from the backward, more
  // than max_dist_from_bw 10"); "" when it measured nothing or no ban.
  std::vector<std::string> ban_detail;
  // Set by choose_saved_values_set on the cut it returns (with the story):
  // the step that decided (PartitionTrace::budget_step's names; "" when no
  // budget logic ran); per node, the ban the runtime-optimized tier gave it
  // that `tier` ("more_aggressive" or "aggressive") does not, when the cut
  // is that tier's ("" if none; empty vector: no tier lifted any); and the
  // knapsack items the final knapsack kept banned (empty unless the
  // knapsack decided).
  std::string_view budget_step;
  std::string_view tier;
  std::vector<std::string_view> tier_lifted;
  std::vector<uint8_t> knapsack_kept;
};

// Per-node overrides of the ban rules; each vector may be empty (none).
struct CutOverrides {
  // Nodes the memory budget allows to be recomputed: their bans are lifted
  // (collectives stay banned unless the unsafe option is set).
  std::vector<uint8_t> dont_ban;
  // remat's own (the peak-memory search, memory/peak_budget.h): forward
  // nodes banned from recomputation (so saved when the backward needs them),
  // over any dont_ban; and nodes tied to the backward as MUST_RECOMPUTE
  // nodes are. Views and placeholders are left alone.
  std::vector<uint8_t> ban;
  std::vector<uint8_t> recompute;
};

MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const CutOverrides& overrides);
// `dont_ban` as CutOverrides::dont_ban.
MinCutResult solve_min_cut(const DecideContext& ctx, const MinCutOptions& mc,
                           const std::vector<uint8_t>& dont_ban = {});

// MinCutResult::tie of a value derived from a gradient input.
inline constexpr std::string_view kTieTangent = "it is derived from a gradient input (a tangent)";

// What a cut says about each node, keyed by joint id (`g` is the graph it
// cut, derived from a joint graph of `joint_size` nodes): MinCutResult's
// ban_reason, and its capacity / tie / lifted / budget fields when the cut
// recorded its story (DecideContext::story or trace; empty vectors
// otherwise). The pipeline turns it into NodeDecision's why. ban_detail
// views the cut's own strings: the cut must outlive the story (every user
// builds its plan from the two at once).
struct CutStory {
  std::vector<std::string_view> ban_reason;  // "" for nodes without one; empty: no cut ran
  std::vector<int64_t> capacity;             // MinCutResult::kNoCapacity for none
  std::vector<std::string_view> tie;
  std::vector<std::string_view> lifted;
  std::vector<std::string_view> ban_detail;
  // MinCutResult's budget fields, by joint id.
  std::string_view budget_step;
  std::string_view tier;
  std::vector<std::string_view> tier_lifted;
  std::vector<uint8_t> knapsack_kept;
};
CutStory cut_story(const Graph& g, const MinCutResult& cut, size_t joint_size);

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
std::vector<MemoryBudgetPoint> memory_budget_pareto(const DecideContext& ctx,
                                                    double resolution = 1e-3,
                                                    std::span<const double> budgets = {});

// One plan of the peak-memory search: a saved set as choose_saved_values_set
// would return it for some activation budget, and how to cut it again.
struct BudgetPlan {
  std::string label;          // "runtime-optimized", "knapsack 0.5", "inputs only", ...
  std::vector<NodeId> saved;  // the saved values, graph order
  MinCutResult cut;           // the cut behind it (empty for "inputs only")
  MinCutOptions options;      // its ban rules
  CutOverrides overrides;     // and their overrides
  bool from_cut = true;       // false: not a cut ("inputs only")
};

// The plans choose_saved_values_set returns for activation budget 1 (the
// runtime-optimized cut), for the two more aggressive tiers, for each of
// `budgets` (the knapsack's plans; give them in descending order) and for
// budget 0 (inputs only), in that order: torch's own order of increasing
// recomputation (each tier recomputes what the one before does and more; the
// knapsack's estimated recompute runtime grows as its budget shrinks). Each
// saved set comes once (a repeat is skipped). Plans are cut one at a time, as
// next() asks for them. Budgets in (0, 1) need a range of activation sizes
// and knapsack items; a graph without them gets the tiers, then what the
// release returns when the knapsack has no items (before 2.14: the inputs
// and the MUST_SAVE banned nodes; from 2.14 the fully aggressive cut, already
// listed), then "inputs only". Budget 0 is "inputs only" unless the release
// cannot save an input (2.15's runtime-epilogue mutation): then it is the
// knapsack at budget 0 (or a tier already listed).
class BudgetPlanList {
 public:
  BudgetPlanList(const DecideContext& ctx, std::span<const double> budgets);
  ~BudgetPlanList();
  std::optional<BudgetPlan> next();  // nullopt after the last plan

 private:
  struct State;
  std::unique_ptr<State> s_;
};

struct SavedSets {
  std::vector<NodeId> saved_values;
  std::vector<NodeId> saved_sym_nodes;
  std::vector<NodeId> saved_opaque_nodes;
};

// The min-cut's chosen values (ids of `g`) split by kind, as torch splits
// them after its cross-rank sync: sym nodes (assert-only SymBools dropped
// from 2.12 on), opaque values (2.12 on), and tensors, each in the order
// chosen.
SavedSets split_saved_values(const Graph& g, const std::vector<NodeId>& chosen,
                             const TorchBehavior& torch);

// default_partition's selection (the loop over forward nodes). Throws
// Error naming the node where torch asserts. `graph_has_recomputable_ops`
// is torch's has_recomputable_ops(joint_module), taken before tag cleanup;
// nullopt computes it from `g`.
SavedSets default_saved_values(const Graph& g, const NodeInfo& info,
                               const PartitionOptions& options,
                               std::optional<bool> graph_has_recomputable_ops = std::nullopt);

}  // namespace remat
