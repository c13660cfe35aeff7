// memory/link.cc — the saved values' way from the forward to the backward.
//
// Contract: memory/link.h.
#include "memory/link.h"

#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "remat/error.h"

namespace remat::memory {

ForwardOutputs forward_outputs(const Graph& forward, int num_fwd_outputs) {
  ForwardOutputs out;
  if (num_fwd_outputs < 0)
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("num_fwd_outputs is negative ({})", num_fwd_outputs));
  // Every leaf, node or not (kNoNode), counts toward num_fwd_outputs.
  const std::vector<NodeId> all = split_outputs(forward, 0).bwd;
  if (static_cast<size_t>(num_fwd_outputs) > all.size())
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("num_fwd_outputs is {} but the forward returns {} values",
                            num_fwd_outputs, all.size()));
  out.outputs.assign(all.begin(), all.begin() + num_fwd_outputs);
  out.saved.assign(all.begin() + num_fwd_outputs, all.end());
  return out;
}

std::vector<NodeId> link_backward_inputs(const Graph& forward, const Graph& backward,
                                         const ForwardOutputs& fw_outputs) {
  std::vector<NodeId> link(backward.size(), kNoNode);
  std::unordered_map<StrId, size_t> by_name;  // the forward node's name -> its saved slot
  const bool same_pool = forward.shares_strings_with(backward);
  std::unordered_map<std::string, size_t> by_text;  // when the pools differ
  for (size_t i = 0; i < fw_outputs.saved.size(); ++i) {
    const NodeId f = fw_outputs.saved[i];
    if (f == kNoNode) continue;
    if (same_pool) by_name.emplace(forward.node(f).name, i);
    else by_text.emplace(std::string(forward.name(f)), i);
  }
  std::vector<uint8_t> taken(fw_outputs.saved.size(), 0);
  std::vector<NodeId> unnamed;  // placeholders left for positional linking
  for (NodeId b = 0; b < backward.size(); ++b) {
    if (backward.node(b).kind != NodeKind::kPlaceholder) continue;
    if (is_tangent(backward, b) || is_bwd_seed_offset(backward, b) ||
        is_fwd_seed_offset(backward, b) || is_backward_state(backward, b))
      continue;
    size_t slot = fw_outputs.saved.size();
    if (same_pool) {
      auto it = by_name.find(backward.node(b).name);
      if (it != by_name.end()) slot = it->second;
    } else {
      auto it = by_text.find(std::string(backward.name(b)));
      if (it != by_text.end()) slot = it->second;
    }
    if (slot < taken.size() && !taken[slot]) {
      taken[slot] = 1;
      link[b] = fw_outputs.saved[slot];
    } else {
      unnamed.push_back(b);
    }
  }
  size_t next = 0;
  for (NodeId b : unnamed) {
    while (next < taken.size() && (taken[next] || fw_outputs.saved[next] == kNoNode)) ++next;
    if (next == taken.size()) break;
    taken[next] = 1;
    link[b] = fw_outputs.saved[next];
  }
  return link;
}

}  // namespace remat::memory
