// graph/impure.cc — see impure.h.
#include "graph/impure.h"

namespace remat {

bool is_impure_node(const Graph& g, NodeId id, Impurity rule) {
  const Node& n = g.node(id);
  if (n.kind == NodeKind::kPlaceholder || n.kind == NodeKind::kOutput) return true;
  if (n.kind != NodeKind::kCallFunction) return false;
  if (n.has(kFlagImpure)) return true;
  const OpInfo* op = g.op(id);
  if (!rule.random || op == nullptr) return false;
  // 2.13 judges a packet (torch.ops.aten.rand) by its .default overload,
  // whose tags a packet's OpInfo carries. 2.12's is_impure asks the packet
  // itself for `_nondeterministic_seeded`, which it has not: never random.
  const bool judged =
      op->kind == OpKind::kOverload || (op->kind == OpKind::kPacket && rule.packet_default);
  return judged && (op->tags & kTagNondeterministicSeeded) != 0;
}

}  // namespace remat
