// rewrite/getitems.cc — raise_getitems: torch 2.13's
// compile_utils.raise_getitems.
//
// Contract (rewrite.h): every operator.getitem node, taken in reverse graph
// order, moves to just after its only input (FX `parent.append(node)`), so
// sibling getitems keep their relative order right after their parent. The
// moves are replayed on a doubly linked list of node ids, each in O(1); a
// getitem whose input count is not one is an Error, as torch asserts. Names
// and origins are kept. raised_getitems_order replays the moves on any
// order of a graph's nodes (reorder.cc's, before it rebuilds the backward).
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "graph/copy.h"
#include "remat/error.h"
#include "rewrite/rewrite.h"

namespace remat {

std::optional<std::vector<NodeId>> raised_getitems_order(const Graph& g, std::span<const NodeId> order) {
  const size_t n = g.size();
  if (order.empty()) return std::nullopt;
  std::vector<NodeId> prev(n, kNoNode), next(n, kNoNode);
  for (size_t k = 0; k < order.size(); ++k) {
    prev[order[k]] = k == 0 ? kNoNode : order[k - 1];
    next[order[k]] = k + 1 == order.size() ? kNoNode : order[k + 1];
  }
  NodeId head = order[0];
  bool moved = false;

  for (size_t k = order.size(); k-- > 0;) {
    const NodeId id = order[k];
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
  if (!moved) return std::nullopt;
  std::vector<NodeId> raised;
  raised.reserve(order.size());
  for (NodeId id = head; id != kNoNode; id = next[id]) raised.push_back(id);
  return raised;
}

Graph raise_getitems(Graph g) {
  std::vector<NodeId> identity(g.size());
  std::iota(identity.begin(), identity.end(), NodeId{0});
  const std::optional<std::vector<NodeId>> order = raised_getitems_order(g, identity);
  if (!order) return unchanged(std::move(g));

  GraphBuilder b(g);  // shares g's strings: copies re-hash nothing
  NodeCopier copier(g, b);
  std::vector<NodeId> remap(g.size(), kNoNode);
  for (NodeId id : *order) remap[id] = copier.copy(id, remap);
  return b.finish();
}

}  // namespace remat
