// rewrite/reorder.cc — reorder_to_mimic_autograd_engine: torch 2.13's
// reordering_to_mimic_autograd_engine.
//
// Contract (rewrite.h): the backward is rebuilt as the autograd engine would
// run it. Placeholders come first, in order. Then, from the first user of a
// tangent to the end, each node is inserted together with the inputs it
// still lacks: those are collected by a walk over inputs (an explicit stack)
// and inserted in their original order. copy_ nodes before that first user
// are inserted first, the same way, since they may not depend on a tangent.
// Nodes before the first tangent user that nothing after it needs are
// dropped, as in torch. A backward where no tangent has a user is returned
// unchanged. Names are kept (FX's node_copy into a fresh graph), and so are
// origins. reorder_and_raise_getitems gives the graph the two passes give
// in turn, in one rebuild.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "analyze/analyze.h"
#include "graph/copy.h"
#include "rewrite/rewrite.h"

namespace remat {

namespace {

// The autograd engine's order of the backward's nodes (dropped nodes left
// out); nullopt when no tangent has a user (the backward stays as it is).
std::optional<std::vector<NodeId>> autograd_engine_order(const Graph& bw) {
  const size_t n = bw.size();
  NodeId first_bwd = kNoNode;
  for (NodeId id = 0; id < n; ++id) {
    if (!is_tangent(bw, id)) continue;
    for (NodeId u : bw.users(id)) first_bwd = std::min(first_bwd, u);
  }
  if (first_bwd == kNoNode) return std::nullopt;

  std::vector<NodeId> order;
  order.reserve(n);
  std::vector<uint8_t> inserted(n, 0);
  for (NodeId id = 0; id < n; ++id) {
    if (bw.node(id).kind == NodeKind::kPlaceholder) {
      order.push_back(id);
      inserted[id] = 1;
    }
  }

  // One insertion: the node and its transitive inputs not yet inserted,
  // in original order. `seen` stamps membership in the current batch.
  std::vector<uint32_t> seen(n, 0);
  uint32_t stamp = 0;
  std::vector<NodeId> stack, batch;
  auto insert = [&](NodeId start) {
    ++stamp;
    batch.clear();
    stack.assign(1, start);
    while (!stack.empty()) {
      const NodeId x = stack.back();
      stack.pop_back();
      if (inserted[x] || seen[x] == stamp) continue;
      seen[x] = stamp;
      batch.push_back(x);
      for (NodeId in : bw.inputs(x)) stack.push_back(in);
    }
    std::sort(batch.begin(), batch.end());
    for (NodeId x : batch) {
      inserted[x] = 1;
      order.push_back(x);
    }
  };
  for (NodeId id = 0; id < first_bwd; ++id) {
    const OpInfo* op = bw.op(id);
    if (bw.node(id).kind == NodeKind::kCallFunction && op != nullptr &&
        bw.str(op->name) == "aten.copy_.default") {
      insert(id);
    }
  }
  for (NodeId id = first_bwd; id < n; ++id) insert(id);
  return order;
}

bool is_identity(const std::vector<NodeId>& order, size_t n) {
  if (order.size() != n) return false;
  for (size_t k = 0; k < n; ++k)
    if (order[k] != k) return false;
  return true;
}

}  // namespace

Graph reorder_to_mimic_autograd_engine(Graph bw) {
  const std::optional<std::vector<NodeId>> order = autograd_engine_order(bw);
  if (!order) return bw;
  // Often the backward is in that order already.
  if (is_identity(*order, bw.size())) return unchanged(std::move(bw));
  // torch copies into a fresh FX graph, which could rename a node; but the
  // backward's names are already distinct and FX-legal (extraction named
  // them), so every copy keeps its name and no namespace is needed.
  return GraphBuilder::rearrange(bw, *order);
}

// The two passes' orders composed, then one rebuild: the getitem moves are
// replayed on the engine's order exactly as raise_getitems replays them on
// the reordered graph's nodes, which are that order's.
Graph reorder_and_raise_getitems(Graph bw) {
  std::optional<std::vector<NodeId>> order = autograd_engine_order(bw);
  if (!order) {
    order.emplace(bw.size());
    std::iota(order->begin(), order->end(), NodeId{0});
  }
  if (std::optional<std::vector<NodeId>> raised = raised_getitems_order(bw, *order))
    order = std::move(raised);
  if (is_identity(*order, bw.size())) return unchanged(std::move(bw));
  return GraphBuilder::rearrange(bw, *order);
}

}  // namespace remat
