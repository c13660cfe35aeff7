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

// A joint graph with the arguments torch passes along with it.
struct JointGraph {
  Graph graph;
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
};

PartitionResult min_cut_rematerialization_partition(const JointGraph& joint,
                                                    const PartitionOptions& options);
PartitionResult default_partition(const JointGraph& joint,
                                  const PartitionOptions& options);

// One point of the memory-budget trade-off curve.
struct MemoryBudgetPoint {
  double budget = 0;             // the activation memory budget asked for
  double recompute_runtime = 0;  // estimated runtime of what is recomputed
  double memory_ratio = 0;       // saved activations: 0 = inputs only, 1 = runtime-optimized
};

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
