// decide/cut_memo.h — what every solve_min_cut over one context computes
// alike, kept from one cut to the next.
//
// Contract:
//  * A CutMemo belongs to one DecideContext (its graph, classification,
//    distances and options): whoever makes the context and runs many cuts
//    over it (the peak-memory search runs dozens: torch's candidate list,
//    the repair path's moves) makes one and points DecideContext::memo at
//    it. A context made another way must not share it.
//  * It keeps, per node, what the cut reads from the node and the context
//    alone, never from the cut's overrides or from earlier bans: `_size_of`,
//    the X_in -> X_out weight, and should_ban_recomputation's reason (per
//    combination of the three MinCutOptions that rule reads). A value is
//    stored only once computed without an exception, so a node whose lookup
//    raises raises again, in the same place of the walk.
//  * Cuts that record their story (DecideContext::story or trace) neither
//    read nor fill it: they log and explain as they go.
//  * Not thread-safe: one search at a time.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "decide/decide.h"
#include "remat/graph.h"

namespace remat {

// The weight of a node's X_in -> X_out edge (min_cut.cc get_node_weight).
struct NodeWeight {
  int64_t capacity;
  const char* cannot_save;  // torch's reason, for infinite weights
  bool is_float;            // a Python float in torch (prints as "1.0")
};

class CutMemo {
 public:
  // A size not computed yet (here and in a cut without a memo).
  static constexpr int64_t kUnknownSize = std::numeric_limits<int64_t>::min();

  explicit CutMemo(size_t nodes) : size_(nodes, kUnknownSize), weight_(nodes) {}

  int64_t& size(NodeId n) { return size_[n]; }
  std::optional<NodeWeight>& weight(NodeId n) { return weight_[n]; }
  // Node n's should_ban reason under `mc`'s ban-rule options (null: not
  // banned), once computed.
  std::optional<const char*>& ban_reason(const MinCutOptions& mc, NodeId n) {
    std::vector<std::optional<const char*>>& r =
        reasons_[(mc.ban_if_not_in_allowlist ? 1 : 0) | (mc.ban_if_materialized_backward ? 2 : 0) |
                 (mc.ban_if_reduction ? 4 : 0)];
    if (r.empty()) r.resize(size_.size());
    return r[n];
  }

 private:
  std::vector<int64_t> size_;
  std::vector<std::optional<NodeWeight>> weight_;
  // By ban_if_not_in_allowlist, _materialized_backward, _reduction.
  std::array<std::vector<std::optional<const char*>>, 8> reasons_;
};

}  // namespace remat
