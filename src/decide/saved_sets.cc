// decide/saved_sets.cc — split_saved_values: the min-cut's choice by kind.
//
// Contract (decide.h): torch's min_cut_rematerialization_partition splits
// its saved values after the cross-rank sync, so the split runs on the
// (possibly replaced) choice just before extraction: sym nodes (from 2.12
// on an assert-only SymBool is dropped: nothing reads it), opaque values
// (2.12 on), and tensors, each list in the order chosen.
#include "decide/decide.h"

namespace remat {

SavedSets split_saved_values(const Graph& g, const std::vector<NodeId>& chosen,
                             const TorchBehavior& torch) {
  SavedSets saved;
  for (NodeId id : chosen) {
    if (is_sym_node(g, id)) {
      // 2.11 saves every sym node it chose; 2.12 drops a SymBool that only
      // runtime asserts read (the backward recomputes it, assert included).
      if (!torch.drop_assert_only_symbool || !is_assert_only_symbool(g, id))
        saved.saved_sym_nodes.push_back(id);
    } else if (is_opaque_node(g, id, torch)) {
      saved.saved_opaque_nodes.push_back(id);
    } else {
      saved.saved_values.push_back(id);
    }
  }
  return saved;
}

}  // namespace remat
