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
#include <vector>

#include "decide/decide.h"
#include "remat/graph.h"

namespace remat {

class CutMemo {
 public:
  explicit CutMemo(size_t nodes) : size_(nodes, kUnknownSize), weight_(nodes) {}

  // The X_in -> X_out edge's weight (min_cut.cc get_node_weight).
  struct Weight {
    int64_t capacity = 0;
    const char* cannot_save = nullptr;  // torch's reason, for infinite weights
    bool is_float = false;              // a Python float in torch (prints as "1.0")
    bool known = false;
  };

  static constexpr int64_t kUnknownSize = std::numeric_limits<int64_t>::min();
  int64_t& size(NodeId n) { return size_[n]; }
  Weight& weight(NodeId n) { return weight_[n]; }

  // Node n's should_ban reason under `mc`'s ban-rule options (null: not
  // banned), valid once ban_known(mc, n) is set.
  const char*& ban_reason(const MinCutOptions& mc, NodeId n) { return rules(mc).reason[n]; }
  uint8_t& ban_known(const MinCutOptions& mc, NodeId n) { return rules(mc).known[n]; }

 private:
  struct Rules {
    std::vector<const char*> reason;
    std::vector<uint8_t> known;
  };
  Rules& rules(const MinCutOptions& mc) {
    Rules& r = rules_[(mc.ban_if_not_in_allowlist ? 1 : 0) | (mc.ban_if_materialized_backward ? 2 : 0) |
                      (mc.ban_if_reduction ? 4 : 0)];
    if (r.known.empty()) {
      r.reason.assign(size_.size(), nullptr);
      r.known.assign(size_.size(), 0);
    }
    return r;
  }

  std::vector<int64_t> size_;
  std::vector<Weight> weight_;
  std::array<Rules, 8> rules_;  // by ban_if_not_in_allowlist, _materialized_backward, _reduction
};

}  // namespace remat
