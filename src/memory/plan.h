// memory/plan.h — stage 6 (memory): what a finished partition costs when it
// runs, and what could make it read the wrong data.
//
// Contract: measure_plan fills a PartitionResult's `memory`
// (simulate_memory on its two graphs), `hazards` (find_mutation_hazards,
// with the joint graph's mutated_inputs) and `recompute_runtime` (the
// options' runtime estimator summed, in graph order, over the nodes decided
// kRecomputed; it reads them in `decided`, the graph the decision was made
// on, whose origins are joint ids: the same nodes and metadata as the joint
// graph's, so a plan needs no joint graph to be measured; a "custom" estimator, a Python hook, and "profile" without
// measured times are replaced by "flops", so measuring never calls back into
// the host; a node whose flop formula rejects its shapes counts 1). The peak-memory search
// (peak_budget.h) is built on it.
#pragma once

#include "remat/options.h"
#include "remat/result.h"

namespace remat {

void measure_plan(const Graph& decided, const std::vector<NodeId>& mutated_inputs,
                  const PartitionOptions& options, PartitionResult& r);

// What measure_plan adds to recompute_runtime for node `id` of `decided`
// when the backward recomputes it: the options' estimator ("flops" for a
// host hook or "profile" without times), 1 where the flop formula rejects
// the shapes or no time was measured. The peak-memory optimizer prices its
// plans with it (optimize/space.h), so both agree by construction.
double recompute_cost(const Graph& decided, NodeId id, const PartitionOptions& options);

// The forward placeholders of `r` that come from these joint placeholders.
std::vector<NodeId> forward_inputs_of(const PartitionResult& r, const std::vector<NodeId>& joint_ids);

}  // namespace remat
