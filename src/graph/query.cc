// graph/query.cc — the node questions of query.h that need a loop.
//
// Contract: see query.h. Argument trees are walked in place (pre-order
// items, a container's children follow it), without copying children.
#include "graph/query.h"

#include <algorithm>

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

std::optional<int64_t> getitem_index(const Graph& g, NodeId id) {
  if (!is_getitem(g, id)) return std::nullopt;
  const ArgId key = positional(g, id, 1);
  if (key == kNoArg || g.arg(key).kind != ArgKind::kInt) return std::nullopt;
  return g.arg(key).i;
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

OutputLeaves split_outputs(const Graph& g, int num_fwd_outputs) {
  const NodeId out = g.output();
  std::vector<ArgId> leaves;
  if (out != kNoNode && g.node(out).args != kNoArg) {
    // pytree leaves in pre-order: lists, tuples and dict values are walked
    // into; dict keys are not leaves; everything else (a slice included) is
    // one leaf. Explicit stack of (container, next child).
    struct Frame {
      ArgId at;    // next child
      ArgId stop;  // end of the container
      bool dict;
      bool next_is_key;
    };
    const ArgId root = g.node(out).args;
    std::vector<Frame> stack{{root + 1, root + g.arg(root).span, false, false}};
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.at >= f.stop) {
        stack.pop_back();
        continue;
      }
      const ArgId a = f.at;
      const Arg& arg = g.arg(a);
      f.at += arg.span;
      if (f.dict) {
        const bool key = f.next_is_key;
        f.next_is_key = !f.next_is_key;
        if (key) continue;
      }
      switch (arg.kind) {
        case ArgKind::kList:
        case ArgKind::kTuple:
        case ArgKind::kDict:
          stack.push_back({a + 1, a + arg.span, arg.kind == ArgKind::kDict, true});
          break;
        default:
          leaves.push_back(a);
          break;
      }
    }
  }
  const size_t split =
      std::min(leaves.size(), static_cast<size_t>(num_fwd_outputs < 0 ? 0 : num_fwd_outputs));
  OutputLeaves out_leaves;
  out_leaves.fwd_args.assign(leaves.begin(), leaves.begin() + split);
  out_leaves.bwd_args.assign(leaves.begin() + split, leaves.end());
  auto node_of = [&](ArgId a) { return g.arg(a).kind == ArgKind::kNode ? g.arg(a).id : kNoNode; };
  for (ArgId a : out_leaves.fwd_args) out_leaves.fwd.push_back(node_of(a));
  for (ArgId a : out_leaves.bwd_args) out_leaves.bwd.push_back(node_of(a));
  return out_leaves;
}

}  // namespace remat
