// graph/query.cc — the node questions of query.h that need a loop.
//
// Contract: see query.h. Argument trees are walked in place (pre-order
// items, a container's children follow it), without copying children.
#include "graph/query.h"

namespace remat {
namespace {

// `isinstance(target, OpOverload) and target._schema.is_mutable`.
bool is_mutable_overload(const Graph& g, NodeId id) {
  const OpInfo* op = g.op(id);
  return op != nullptr && op->kind == OpKind::kOverload && op->is_mutable;
}

}  // namespace

ArgId positional(const Graph& g, NodeId id, size_t i) {
  const ArgId root = g.node(id).args;
  if (root == kNoArg) return kNoArg;
  const ArgId stop = root + g.arg(root).span;
  ArgId c = root + 1;
  for (size_t k = 0; c < stop; c += g.arg(c).span, ++k) {
    if (k == i) return c;
  }
  return kNoArg;
}

ArgId dict_lookup(const Graph& g, ArgId dict, std::string_view key) {
  if (dict == kNoArg || g.arg(dict).kind != ArgKind::kDict) return kNoArg;
  const ArgId stop = dict + g.arg(dict).span;
  // Children alternate key, value; a key without a value ends the walk.
  for (ArgId k = dict + 1; k < stop;) {
    const ArgId v = k + g.arg(k).span;
    if (v >= stop) break;
    if (g.arg(k).kind == ArgKind::kStr && g.str(g.arg(k).id) == key) return v;
    k = v + g.arg(v).span;
  }
  return kNoArg;
}

bool must_be_in_forward(const Graph& g, NodeId id) {
  const PartitionerTag tag = g.node(id).tag;
  if (tag == PartitionerTag::kMustBeInForward) return true;
  return tag != PartitionerTag::kIsBackward && tag != PartitionerTag::kMustBeInBackward &&
         is_mutable_overload(g, id);
}

bool must_be_in_backward(const Graph& g, NodeId id) {
  const PartitionerTag tag = g.node(id).tag;
  if (tag == PartitionerTag::kMustBeInBackward) return true;
  return tag == PartitionerTag::kIsBackward && is_mutable_overload(g, id);
}

std::vector<NodeId> joint_ids(const Graph& g, std::span<const NodeId> ids) {
  std::vector<NodeId> out;
  out.reserve(ids.size());
  for (NodeId id : ids) out.push_back(joint_id(g, id));
  return out;
}

std::vector<NodeId> nodes_by_joint_id(const Graph& g, size_t joint_size) {
  std::vector<NodeId> out(joint_size, kNoNode);
  for (NodeId id = 0; id < g.size(); ++id) {
    const NodeId j = joint_id(g, id);
    if (j < joint_size) out[j] = id;
  }
  return out;
}

}  // namespace remat
