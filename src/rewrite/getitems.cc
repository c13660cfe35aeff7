// rewrite/getitems.cc — raise_getitems: torch 2.13's
// compile_utils.raise_getitems.
//
// Contract (rewrite.h): every operator.getitem node, taken in reverse graph
// order, moves to just after its only input (FX `parent.append(node)`), so
// sibling getitems keep their relative order right after their parent. The
// moves are replayed on a doubly linked list of node ids, each in O(1); a
// getitem whose input count is not one is an Error, as torch asserts. Names
// and origins are kept.
#include <vector>

#include <fmt/format.h>

#include "graph/copy.h"
#include "remat/error.h"
#include "rewrite/rewrite.h"

namespace remat {

Graph raise_getitems(Graph g) {
  const size_t n = g.size();
  if (n == 0) return g;
  std::vector<NodeId> prev(n), next(n);
  for (NodeId id = 0; id < n; ++id) {
    prev[id] = id == 0 ? kNoNode : id - 1;
    next[id] = id + 1 == n ? kNoNode : id + 1;
  }
  NodeId head = 0;
  bool moved = false;

  for (NodeId id = static_cast<NodeId>(n); id-- > 0;) {
    const OpInfo* op = g.op(id);
    if (g.node(id).kind != NodeKind::kCallFunction || op == nullptr ||
        g.str(op->name) != "operator.getitem") {
      continue;
    }
    if (g.inputs(id).size() != 1) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': a getitem must have exactly 1 input node, it has {}",
                              g.name(id), g.inputs(id).size()));
    }
    const NodeId parent = g.inputs(id)[0];
    if (next[parent] == id) continue;
    moved = true;
    // Unlink, then relink after the parent.
    if (prev[id] != kNoNode) next[prev[id]] = next[id];
    else head = next[id];
    if (next[id] != kNoNode) prev[next[id]] = prev[id];
    prev[id] = parent;
    next[id] = next[parent];
    if (next[parent] != kNoNode) prev[next[parent]] = id;
    next[parent] = id;
  }

  if (!moved) return unchanged(std::move(g));

  GraphBuilder b(g);  // shares g's strings: copies re-hash nothing
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(n, kNoNode);
  for (NodeId id = head; id != kNoNode; id = next[id]) remap[id] = copier.copy(id, remap);
  return b.finish();
}

}  // namespace remat
