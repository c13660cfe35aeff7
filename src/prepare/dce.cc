// prepare/dce.cc — eliminate_dead_code: fx.Graph.eliminate_dead_code.
//
// Contract: walking the graph backwards, a node is removed when none of its
// users survived and it is not impure (is_impure_node). Placeholders and the
// output always stay; get_attr nodes die like any pure node. The result is a
// compacted copy whose nodes keep `origin`.
#include <vector>

#include "graph/copy.h"
#include "graph/impure.h"
#include "prepare/prepare.h"

namespace remat {

Graph eliminate_dead_code(const Graph& g, Impurity rule) {
  const size_t n = g.size();
  // Live user counts; users always come later, so a reverse walk sees each
  // node after every one of its users is decided.
  std::vector<uint32_t> live_users(n);
  for (NodeId id = 0; id < n; ++id) live_users[id] = static_cast<uint32_t>(g.users(id).size());
  std::vector<uint8_t> alive(n, 1);
  for (NodeId id = static_cast<NodeId>(n); id-- > 0;) {
    if (live_users[id] != 0 || is_impure_node(g, id, rule)) continue;
    alive[id] = 0;
    for (NodeId in : g.inputs(id)) --live_users[in];
  }
  return copy_kept(g, alive);
}

}  // namespace remat
