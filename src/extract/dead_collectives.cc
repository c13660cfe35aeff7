// extract/dead_collectives.cc — default_partition's last DCE:
// `eliminate_dead_code(is_impure_node=is_not_collective)` on the extracted
// forward and backward.
//
// Contract (extract.h): every node whose op is not in the _c10d_functional
// namespace counts as impure and stays; a collective goes when, after the
// removals behind it, nothing uses it (FX's reverse walk). Names and origins
// are kept; FX frees no name when it erases a node, so the graphs' FxNamespace
// stays valid.
#include <vector>

#include "extract/extract.h"
#include "graph/copy.h"

namespace remat {

Graph eliminate_dead_collectives(const Graph& g) {
  const size_t n = g.size();
  // Users that survive, counted as the reverse walk keeps them.
  std::vector<uint32_t> live_users(n, 0);
  std::vector<uint8_t> keep(n, 0);
  for (size_t k = n; k-- > 0;) {
    const NodeId id = static_cast<NodeId>(k);
    const OpInfo* op = g.op(id);
    const bool collective = op != nullptr && g.str(op->ns) == "_c10d_functional";
    if (collective && live_users[id] == 0) continue;
    keep[id] = 1;
    for (NodeId in : g.inputs(id)) ++live_users[in];
  }
  return copy_kept(g, keep);
}

}  // namespace remat
