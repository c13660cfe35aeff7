// memory/plan.cc — measure_plan (memory/plan.h).
#include "memory/plan.h"

#include <stdexcept>

#include "budget/flops.h"
#include "remat/error.h"

namespace remat {

std::vector<NodeId> forward_inputs_of(const PartitionResult& r, const std::vector<NodeId>& joint_ids) {
  std::vector<NodeId> out;
  if (joint_ids.empty()) return out;
  std::vector<uint8_t> wanted;
  for (NodeId j : joint_ids) {
    if (j >= wanted.size()) wanted.resize(j + 1, 0);
    wanted[j] = 1;
  }
  for (NodeId n = 0; n < r.forward.size(); ++n) {
    const Node& node = r.forward.node(n);
    if (node.kind == NodeKind::kPlaceholder && node.origin < wanted.size() && wanted[node.origin])
      out.push_back(n);
  }
  return out;
}

double recompute_cost(const Graph& decided, NodeId id, const PartitionOptions& options) {
  const std::string& name = options.activation_memory_budget_runtime_estimator;
  const bool own = name == "custom" || (name == "profile" && options.profiled_runtimes.empty());
  // Both arms as views: `own ? "flops" : name` would be a std::string temporary.
  const std::string_view estimator = own ? std::string_view("flops") : std::string_view(name);
  const NodeId joint_id = decided.node(id).origin;
  try {
    // Measured runtimes are per joint node; the others read the node.
    return estimator == "profile" ? options.profiled_runtimes.at(joint_id)
                                  : estimate_runtime(decided, id, estimator, options.torch);
  } catch (const Error&) {
    return 1;  // a shape torch's flop formula rejects: priced as a pointwise op
  } catch (const std::out_of_range&) {
    return 1;  // fewer measured runtimes than joint nodes: validate() reports it
  }
}

void measure_plan(const Graph& decided, const std::vector<NodeId>& mutated_inputs,
                  const PartitionOptions& options, PartitionResult& r) {
  r.memory = simulate_memory(r.forward, r.backward, r.num_fwd_outputs, options.memory_model,
                             options.inductor_reorder);
  r.hazards = find_mutation_hazards(r.forward, r.backward, r.num_fwd_outputs,
                                    forward_inputs_of(r, mutated_inputs));
  double total = 0;
  for (NodeId id = 0; id < decided.size(); ++id) {
    const NodeId joint_id = decided.node(id).origin;
    if (joint_id >= r.decisions.size() ||
        r.decisions[joint_id].where != NodeDecision::Where::kRecomputed)
      continue;
    total += recompute_cost(decided, id, options);
  }
  r.recompute_runtime = total;
}

}  // namespace remat
