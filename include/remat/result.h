// remat/result.h — the types a partition takes and fills: the joint graph
// with what torch passes along with it, and the result (the two graphs, the
// saved values, the decision record, the trace, the memory profile).
//
// Contract: plain data, no behavior beyond small accessors. The stages fill
// these (src/pipeline sequences them); remat/partition.h's entry points
// return them; io writes them (remat/io.h). Node ids in a PartitionResult
// are ids of the input joint graph unless a field says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "remat/graph.h"
#include "remat/memory.h"

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
  // in table order. The partition functions apply them to every op the
  // options' registry does not override itself (OpRegistry::has_override):
  // a caller's override wins over the graph's.
  std::vector<std::pair<std::string, uint8_t>> op_overrides;
  // Placeholders the caller mutates in place after the forward returns
  // (AOTAutograd's input mutations kept out of the graph), in graph order.
  // Read by the mutation-hazard check (remat/memory.h).
  std::vector<NodeId> mutated_inputs;
  // torch.__version__ of the torch the graph was captured under ("2.15.0",
  // "2.14.1+cu132"); empty when not recorded. A front door partitions the
  // graph as that release's partitioner would unless told otherwise
  // (default_options).
  std::string torch_version;
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
  // The reason behind the fate, the one source every reader (the result
  // JSON, the report, --explain) words: the same whether or not the
  // partition was traced. A peak-budget plan (remat's search over many
  // cuts) records no cut's story: its min-cut kinds read as kSavedBanned /
  // kSavedCheaper / kRecomputedCheaper without a capacity.
  // why_template() words each.
  enum class Why : uint8_t {
    kUnknown,            // not recorded
    kDead,               // removed: nothing used it
    kMerged,             // removed: CSE kept the equal node merged_into
    kInput,              // a placeholder: never recomputed
    kTangent,            // derived from a gradient input: only the backward can compute it
    kBackwardOnly,       // only the backward needs it, and computes it there
    kNotNeeded,          // forward only: the backward needs nothing of it
    kSavedBanned,        // saved: recomputation banned (ban_reason), the backward needs it
    kSavedCheaper,       // saved: its X_in -> X_out edge is part of the cheapest cut
    kSavedKnapsack,      // saved: a knapsack item the knapsack kept (ban_reason)
    kSavedDefault,       // the default partitioner saves what the backward reads
    kTied,               // recomputed: tied to the backward (detail: the policy or limit)
    kRecomputedLifted,   // recomputed: the memory budget's knapsack lifted its ban (detail)
    kRecomputedTier,     // recomputed: a memory-budget tier dropped the rule that banned it (detail)
    kRecomputedCheaper,  // recomputed: on the backward side of the cheapest cut
    kRecomputedDefault,  // the default partitioner recomputes tagged ops
    kBudgetInputs,       // recomputed: activation budget 0 saves only the inputs
    kUnused,             // in neither graph
  };
  Where where = Where::kUnused;
  std::string ban_reason;   // why recomputation was banned ("" if it was not)
  // What the ban rule measured ("12 nodes from the backward, more than
  // max_dist_from_bw 10"); "" when it measured nothing.
  std::string ban_detail;
  NodeId merged_into = kNoNode;  // CSE: the equal node that replaced this one
  Why why = Why::kUnknown;
  // The capacity the min cut weighed on the node's X_in -> X_out edge (what
  // saving it costs: its size times 1.1 ** its distance to the backward,
  // doubled when not materialized); -1 when the cut weighed none or its
  // story was not recorded (a peak-budget plan).
  int64_t capacity = -1;
  // kTied: what tied it; kRecomputedLifted: the ban the knapsack lifted;
  // kRecomputedTier: the tier and the ban it dropped.
  std::string detail;
};

// One line torch's partitioner logs (logger
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

// How the peak-memory search found its plan (PartitionOptions::peak_search).
struct PeakSearchSummary {
  std::string search;         // "torch_plans", "fast" or "exact"; "" when no limit was set
  int plans_built = 0;        // candidates built and simulated
  int solver_rounds = 0;      // exact: MILP solves (each cut off a plan that did not fit)
  // fast (exact's first plan too): the priced min-cuts over the plan space
  // it solved (counted work; torch's own candidates' cuts not counted).
  int cuts = 0;
  // exact: no valid plan within the limit recomputes less than this (a proof
  // from the solver over a lower bound of the peak); the plan is optimal
  // when it equals recompute_runtime (`optimal`). -1 when unknown.
  double recompute_lower_bound = -1;
  bool optimal = false;
  int64_t solver_nodes = 0;   // branch-and-bound nodes of every solve (counted work)
  // What cut the search short before it finished (a proof, or its own
  // counted end): "" none, "nodes" (peak_search_nodes ran out), "time"
  // (the peak_search_seconds safety net: the plan may then depend on the
  // machine).
  std::string stopped_by;
  double seconds = 0;         // time of the search
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
  // Under peak_memory_budget: how the plan was found (PeakSearch).
  PeakSearchSummary peak_search;
  // Under backward_order kMemory: whether the memory-aware order was kept
  // (it lowered the simulated peak); empty under kAutograd.
  std::optional<bool> backward_reordered;
};

const char* where_name(NodeDecision::Where w);  // "saved", "recomputed", ...
const char* why_name(NodeDecision::Why w);      // "saved_banned", "tied", ...; "" for kUnknown

}  // namespace remat
