// memory/hazards.cc — saved values that alias an input the step mutates
// before the backward reads them.
//
// Contract: remat/memory.h (find_mutation_hazards). Aliasing is by storage id
// within the forward graph: a saved value aliases an input when one of its
// tensors has the storage of one of the input's tensors.
#include <limits>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "graph/query.h"
#include "memory/link.h"
#include "remat/error.h"
#include "remat/memory.h"

namespace remat {
namespace {

constexpr NodeId kAfterForward = std::numeric_limits<NodeId>::max() - 2;

}  // namespace

std::vector<MutationHazard> find_mutation_hazards(const Graph& fw, const Graph& bw,
                                                  int num_fwd_outputs,
                                                  std::span<const NodeId> mutated_after_forward) {
  // Storage id -> the forward input holding it.
  std::unordered_map<int64_t, NodeId> input_of;
  for (NodeId n = 0; n < fw.size(); ++n) {
    if (fw.node(n).kind != NodeKind::kPlaceholder) continue;
    for (const TensorMeta& t : fw.tensors(n))
      if (t.storage >= 0) input_of.emplace(t.storage, n);
  }
  // Input -> where it is first mutated: a forward node, or kAfterForward.
  std::unordered_map<NodeId, NodeId> mutation;
  for (NodeId n = 0; n < fw.size() && !input_of.empty(); ++n) {
    const OpInfo* op = fw.op(n);
    if (op == nullptr || op->kind != OpKind::kOverload || !op->is_mutable) continue;
    const NodeId dst = node_arg(fw, n, 0);
    if (dst == kNoNode) continue;
    for (const TensorMeta& t : fw.tensors(dst)) {
      auto it = t.storage >= 0 ? input_of.find(t.storage) : input_of.end();
      if (it != input_of.end()) mutation.emplace(it->second, n);
    }
  }
  for (NodeId p : mutated_after_forward) {
    if (p >= fw.size() || fw.node(p).kind != NodeKind::kPlaceholder)
      throw Error(ErrorCode::kInvalidGraph,
                  "mutated_inputs: node " + std::to_string(p) + " is not a forward input");
    mutation.emplace(p, kAfterForward);
  }
  std::vector<MutationHazard> out;
  if (mutation.empty()) return out;

  const memory::ForwardOutputs outs = memory::forward_outputs(fw, num_fwd_outputs);
  const std::vector<NodeId> link = memory::link_backward_inputs(fw, bw, outs);
  std::unordered_map<NodeId, NodeId> placeholder_of;  // forward node -> backward placeholder
  for (NodeId b = 0; b < bw.size(); ++b)
    if (link[b] != kNoNode) placeholder_of.emplace(link[b], b);

  std::vector<uint8_t> reported(fw.size(), 0);
  for (NodeId saved : outs.saved) {
    if (saved == kNoNode || reported[saved]) continue;
    for (const TensorMeta& t : fw.tensors(saved)) {
      auto in = t.storage >= 0 ? input_of.find(t.storage) : input_of.end();
      if (in == input_of.end()) continue;
      auto m = mutation.find(in->second);
      if (m == mutation.end()) continue;
      // Computed from the mutation's result: the backward expects that data.
      if (m->second != kAfterForward && saved > m->second) continue;
      MutationHazard h;
      h.input = in->second;
      h.mutated_by = m->second == kAfterForward ? kNoNode : m->second;
      h.saved = saved;
      auto p = placeholder_of.find(saved);
      if (p != placeholder_of.end())
        for (NodeId user : bw.users(p->second)) h.readers.push_back(user);
      out.push_back(std::move(h));
      reported[saved] = 1;
      break;
    }
  }
  return out;
}

std::string describe_hazard(const Graph& forward, const Graph& backward, const MutationHazard& h) {
  std::string readers;
  for (NodeId r : h.readers)
    readers += fmt::format("{}'{}'", readers.empty() ? "" : ", ", backward.name(r));
  const std::string when =
      h.mutated_by == kNoNode
          ? std::string("after the forward returns (by the caller)")
          : fmt::format("in place by '{}'", forward.name(h.mutated_by));
  std::string what = h.saved == h.input
                         ? fmt::format("the forward saves its input '{}' for the backward",
                                       forward.name(h.input))
                         : fmt::format("the forward saves '{}', an alias of its input '{}', for "
                                       "the backward",
                                       forward.name(h.saved), forward.name(h.input));
  return fmt::format("{}, but '{}' is mutated {} before the backward reads it{}{}", what,
                     forward.name(h.input), when,
                     readers.empty() ? "" : " in ", readers);
}

}  // namespace remat
