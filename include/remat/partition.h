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
#include <string>
#include <utility>
#include <vector>

#include "remat/graph.h"
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

struct PartitionResult {
  // The two graphs. Each node's `origin` is its node in the input joint graph
  // (kNoNode for nodes the partitioner created, such as RNG state plumbing).
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
  // Joint nodes whose recompute policy prepare forced to MUST_SAVE (torch
  // writes these into the joint graph's meta; the adapter mirrors that).
  std::vector<NodeId> forced_must_save;
  // One entry per input joint node.
  std::vector<NodeDecision> decisions;
  std::string partitioner;  // "min_cut" or "default"
  double seconds = 0;       // engine time
  std::vector<StageTime> stages;  // where it went, in the order the stages ran
  PartitionTrace trace;           // see PartitionTrace: empty unless asked for
};

PartitionResult min_cut_rematerialization_partition(const JointGraph& joint,
                                                    const PartitionOptions& options);
PartitionResult default_partition(const JointGraph& joint,
                                  const PartitionOptions& options);

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
