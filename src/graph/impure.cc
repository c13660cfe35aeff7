// graph/impure.cc — see impure.h.
#include "graph/impure.h"

namespace remat {

bool is_impure_node(const Graph& g, NodeId id, bool impure_random) {
  const Node& n = g.node(id);
  if (n.kind == NodeKind::kPlaceholder || n.kind == NodeKind::kOutput) return true;
  if (n.kind != NodeKind::kCallFunction) return false;
  if (n.has(kFlagImpure)) return true;
  const OpInfo* op = g.op(id);
  return impure_random && op != nullptr && op->kind == OpKind::kOverload &&
         (op->tags & kTagNondeterministicSeeded) != 0;
}

}  // namespace remat
