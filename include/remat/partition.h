// remat/partition.h — the partitioners: joint graph in, forward and backward
// graphs out.
//
// Contract: for the same joint graph and options, the saved values (names and
// order) and the forward/backward graphs equal what torch 2.13's
// `min_cut_rematerialization_partition` / `default_partition` return.
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
#include "remat/memory.h"
#include "remat/options.h"

namespace remat {

// A graph module nested in the joint graph's module (a higher-order op's
// body, such as invoke_subgraph's), under its qualified module name.
struct NestedGraph {
  std::string name;  // "repeated_subgraph0", "a.b"
  Graph graph;       // its own pools: ids do not mix with the joint graph's
};

// A joint graph with the arguments torch passes along with it.
struct JointGraph {
  Graph graph;
  // The graph modules nested in the joint module, in the order torch's
  // `named_modules()` walks them. torch's partitioner reads their memory
  // budget annotations (and nothing else of them); nothing is partitioned
  // inside them.
  std::vector<NestedGraph> nested;
  int num_fwd_outputs = 0;
  std::vector<int> static_lifetime_input_indices;
  // Op-category overrides from the JSON "ops" table ("categories"): registry
  // key (the op's packet, or its name when it has none) -> OpCategory bits,
  // in table order. Apply with OpRegistry::set before partitioning.
  std::vector<std::pair<std::string, uint8_t>> op_overrides;
  // Placeholders the caller mutates in place after the forward returns
  // (AOTAutograd's input mutations kept out of the graph), in graph order.
  // Read by the mutation-hazard check (remat/memory.h).
  std::vector<NodeId> mutated_inputs;
};

// Why a joint node ended where it did; for reports and `--explain`.
struct NodeDecision {
  enum class Where : uint8_t {
    kRemoved,      // dead code, or merged into an equal node by CSE
    kForwardOnly,  // computed in the forward, not needed by the backward
    kSaved,        // computed in the forward and saved for the backward
    kRecomputed,   // computed in the forward and again in the backward
    kBackwardOnly, // computed in the backward only
    kUnused,       // in neither graph
  };
  Where where = Where::kUnused;
  std::string ban_reason;   // why recomputation was banned ("" if it was not)
  NodeId merged_into = kNoNode;  // CSE: the equal node that replaced this one
};

// One line torch 2.13's partitioner logs (logger
// "torch._functorch.partitioners"), as remat reproduces it. Recorded only when
// PartitionOptions::trace is set, in the order torch would log them.
struct LogRecord {
  enum class Level : uint8_t { kDebug, kInfo, kWarning };
  Level level = Level::kInfo;
  // torch logs it only under config.debug_partitioner (AOT_PARTITIONER_DEBUG).
  bool debug_only = false;
  std::string format;              // printf-style, torch's text: "too long %s %s %s %s"
  std::vector<std::string> args;   // each argument as Python's str() prints it
};

// One call of torch's get_saved_values_knapsack: what its knapsack saw and
// chose, and the min-cut that followed (torch's "min_cut_information"
// artifact). Node ids are the caller's joint-graph ids.
struct KnapsackRecord {
  double memory_budget = 0;            // the budget asked for
  double expected_runtime = 0;         // the solver's
  std::vector<int> saved_items;        // item indices, as the solver returned them
  std::vector<int> recomputed_items;
  std::vector<NodeId> items;           // recomputable banned nodes, largest first
  std::vector<int64_t> item_bytes;     // _size_of of each item
  std::vector<double> item_memory;     // normalized sizes (the solver's input)
  std::vector<double> item_runtime;    // estimated runtimes (the solver's input)
  std::vector<NodeId> saved_values;    // what the min-cut with the chosen items unbanned saves
  double min_act_size = 0;             // GB saved by the inputs alone
  double max_act_size = 0;             // GB saved by the runtime-optimized cut
  double saved_act_size = 0;           // GB of saved_values
  double more_aggressive_ratio = 0;    // memory ratios of the two intermediate tiers
  double aggressive_ratio = 0;
};

// One point of the memory-budget trade-off curve.
struct MemoryBudgetPoint {
  double budget = 0;             // the activation memory budget asked for
  double recompute_runtime = 0;  // estimated runtime of what is recomputed
  double memory_ratio = 0;       // saved activations: 0 = inputs only, 1 = runtime-optimized
};

// How the engine reached its decision, for logs, traces and reports: filled
// when PartitionOptions::trace or visualize_memory_budget_pareto is set,
// empty otherwise.
struct PartitionTrace {
  std::vector<LogRecord> log;
  std::vector<KnapsackRecord> knapsack;
  // The sweep torch draws for config.visualize_memory_budget_pareto; only
  // when the budget reached the knapsack, as in torch. Sorted, duplicates kept.
  std::vector<MemoryBudgetPoint> pareto;
  // _size_of of each PartitionResult::saved_values entry (trace only).
  std::vector<int64_t> saved_bytes;
  // The memory budget the min-cut partitioner applied (after per-graph
  // overrides) and the step of choose_saved_values_set that decided:
  // "inputs", "runtime_optimized", "more_aggressive", "aggressive",
  // "knapsack", "inputs_and_must_save"; "" when no budget logic ran.
  double memory_budget = 1.0;
  std::string budget_step;

  bool empty() const {
    return log.empty() && knapsack.empty() && pareto.empty() && saved_bytes.empty() &&
           budget_step.empty();
  }
};

// Engine time spent in one pipeline stage.
struct StageTime {
  std::string stage;  // "prepare", "classify", "decide", "extract", ...
  double seconds = 0;
};

// A graph as it stood at one point of the pipeline, under the name of the
// structured-trace artifact torch emits there
// ("before_activation_quantization_fwd_aten_pass", ...).
struct GraphSnapshot {
  std::string name;
  Graph graph;
};

struct PartitionResult {
  // The two graphs. Each node's `origin` is its node in the input joint graph
  // (kCreatedNode for nodes the partitioner created, such as RNG state
  // plumbing: kNoNode always means "not derived", which these graphs are).
  Graph forward;
  Graph backward;
  // Ids in the input joint graph, in the order the forward returns them:
  // saved_values are tensors with version-counter checks, then those without;
  // then opaque values; then sym nodes, symbol bindings first.
  std::vector<NodeId> saved_values;
  std::vector<NodeId> saved_opaque_nodes;
  std::vector<NodeId> saved_sym_nodes;
  int num_fwd_outputs = 0;
  int num_rng_states = 0;  // RNG states inserted before the sym nodes
  // FP8 activation quantization (options.activation_quantization): the saved
  // values the forward returns quantized (joint ids, in forward-output
  // order). Non-empty exactly when torch runs the pass's forward and
  // backward halves (and bumps its counters once each).
  std::vector<NodeId> quantized_values;
  // With options.keep_snapshots: the graphs torch's rewrites log as
  // structured-trace artifacts, in the order torch logs them.
  std::vector<GraphSnapshot> snapshots;
  // Joint nodes whose recompute policy prepare forced to MUST_SAVE (torch
  // writes these into the joint graph's meta; the adapter mirrors that).
  std::vector<NodeId> forced_must_save;
  // One entry per input joint node.
  std::vector<NodeDecision> decisions;
  std::string partitioner;  // "min_cut" or "default"
  double seconds = 0;       // engine time
  std::vector<StageTime> stages;  // where it went, in the order the stages ran
  PartitionTrace trace;           // see PartitionTrace: empty unless asked for
  // What running the two graphs costs (remat/memory.h; node ids are ids of
  // `forward` / `backward`), and the saved values that alias an input the
  // step mutates before the backward reads it (ids of `forward` and
  // `backward`). Under peak_memory_budget the plan has no hazards.
  MemoryProfile memory;
  std::vector<MutationHazard> hazards;
  // Estimated runtime of what the backward recomputes: the options'
  // runtime estimator summed over the joint nodes the plan computes in both
  // graphs.
  double recompute_runtime = 0;
};

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
  // The one-call functions never sync such a plan (it is not torch's
  // decision).
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

const char* where_name(NodeDecision::Where w);  // "saved", "recomputed", ...

}  // namespace remat
