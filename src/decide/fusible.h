// decide/fusible.h — solve_min_cut's fusibility: which producer can fuse
// into which consumer (internal to decide/).
//
// Contract: Fusion answers solve_min_cut's is_fusible(a, b) in O(1) after one linear
// pass: the only rules that look at argument trees (auto_functionalized's
// mutable arguments, triton_kernel_wrapper_functional's cloned tensors) are
// resolved up front into, per consumer node, the list of producers that can
// fuse into it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/ops.h"

namespace remat {

class Fusion {
 public:
  Fusion(const Graph& g, const std::vector<uint8_t>& op_categories);

  uint8_t categories(NodeId n) const { return cat_[n]; }
  bool is_view(NodeId n) const { return (cat_[n] & kCatView) != 0; }
  bool is_getitem(NodeId n) const { return (flags_[n] & kGetitem) != 0; }

  // solve_min_cut's is_fusible(a, b): can producer a fuse into consumer b.
  bool fusible(NodeId a, NodeId b) const {
    if (flags_[b] & kCat) return true;
    if (flags_[b] & kSpecialConsumer) {
      for (uint32_t i = into_off_[b]; i < into_off_[b + 1]; ++i)
        if (into_[i] == a) return true;
    }
    if (flags_[a] & kGetitemOfTriton) return false;
    return (cat_[a] & kCatFusible) && (cat_[b] & kCatFusible);
  }

 private:
  enum : uint8_t { kCat = 1, kSpecialConsumer = 2, kGetitemOfTriton = 4, kGetitem = 8 };
  std::vector<uint8_t> cat_;
  std::vector<uint8_t> flags_;
  // For auto_functionalized / triton wrapper consumers: producers that fuse.
  std::vector<uint32_t> into_off_;
  std::vector<NodeId> into_;
};

}  // namespace remat
