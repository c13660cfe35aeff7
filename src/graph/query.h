// graph/query.h — small questions about one node that every stage asks: its
// target, its arguments, its checkpoint policy, where it must run, and the
// joint node it stands for; and the leaves of the joint output, which
// prepare, analyze, extract and memory all split at num_fwd_outputs.
//
// Contract: the answers read node records and argument trees only (no
// users, no options), so the lowest stage owns them and every stage above
// may use them. Argument helpers answer kNoArg / kNoNode when what they look
// for is absent; nothing here throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "remat/graph.h"

namespace remat {

// --- targets and arguments ------------------------------------------------------

// The call_function target's qualified name ("aten.mm.default"); "" for
// nodes that call nothing.
inline std::string_view target_name(const Graph& g, NodeId id) {
  const OpInfo* op = g.op(id);
  return op != nullptr ? g.str(op->name) : std::string_view();
}

// Whether the node calls the op named `name` (a non-empty qualified name).
inline bool target_is(const Graph& g, NodeId id, std::string_view name) {
  return g.op(id) != nullptr && target_name(g, id) == name;
}

// The node an argument item refers to, or kNoNode for any other item
// (kNoArg included).
inline NodeId arg_node(const Graph& g, ArgId a) {
  if (a == kNoArg) return kNoNode;
  const Arg& arg = g.arg(a);
  return arg.kind == ArgKind::kNode ? arg.id : kNoNode;
}

// Positional argument `i` of a node (kNoArg when it has fewer).
ArgId positional(const Graph& g, NodeId id, size_t i);

// Positional argument `i` when it is a node, else kNoNode.
inline NodeId node_arg(const Graph& g, NodeId id, size_t i) {
  return arg_node(g, positional(g, id, i));
}

// The value stored under string key `key` in the kDict item `dict` (the
// first such entry), or kNoArg when `dict` is absent, not a dict, or has no
// such key.
ArgId dict_lookup(const Graph& g, ArgId dict, std::string_view key);

// inductor's control_deps higher-order op: control_deps(additional_deps,
// subgraph, *deps) runs the subgraph after its dependencies and returns
// (subgraph result, *deps), so getitem(cd, k) for k >= 1 is deps[k - 1].
inline bool is_control_deps(const Graph& g, NodeId id) {
  return target_is(g, id, "higher_order.control_deps");
}

// The node deps[k - 1] of control_deps `cd` that getitem index `k` passes
// through, or kNoNode (k out of range, or that dependency is no node).
inline NodeId control_deps_dep(const Graph& g, NodeId cd, int64_t k) {
  return k >= 1 ? node_arg(g, cd, static_cast<size_t>(k) + 1) : kNoNode;
}

// The type of a device name: "cuda" of "cuda:0", "cpu" of "cpu".
inline std::string_view device_type(std::string_view device) { return device.substr(0, device.find(':')); }

// Whether the node is operator.getitem (it takes one element out of a
// multi-output value).
inline bool is_getitem(const Graph& g, NodeId id) { return target_is(g, id, "operator.getitem"); }

// The integer index of getitem(x, k), or nullopt (no getitem, or a key that
// is no int).
std::optional<int64_t> getitem_index(const Graph& g, NodeId id);

// --- the joint output ----------------------------------------------------------

// The pytree leaves of the joint output node, split at num_fwd_outputs as
// torch's `_extract_fwd_bwd_outputs` splits them. A leaf is a node, or a value
// FX passes through unchanged (None, an int such as a specialized SymInt, a
// float, an opaque object ...): then its node is kNoNode and its arg is the
// output node's argument item that holds it, which extraction copies into
// the output of the graph it builds. For a node leaf, arg is that node's
// item too.
struct OutputLeaves {
  std::vector<NodeId> fwd, bwd;          // kNoNode for a non-node leaf
  std::vector<ArgId> fwd_args, bwd_args; // the leaf's item in g's output args
};
OutputLeaves split_outputs(const Graph& g, int num_fwd_outputs);

// --- policies and placement -------------------------------------------------------

// torch's must_recompute: CheckpointPolicy MUST_RECOMPUTE or PREFER_RECOMPUTE.
inline bool must_recompute(const Node& n) {
  return n.recompute == RecomputePolicy::kMustRecompute ||
         n.recompute == RecomputePolicy::kPreferRecompute;
}

// partitioners._must_be_in_forward / _must_be_in_backward: the
// partitioner_tag says so, or the node is a mutable OpOverload, which stays
// on the side its is_backward tag names.
bool must_be_in_forward(const Graph& g, NodeId id);
bool must_be_in_backward(const Graph& g, NodeId id);

// --- joint ids ------------------------------------------------------------------

// The joint node a node stands for: its origin in a derived graph (which is
// kCreatedNode for a node a rewrite made), its own id in a graph that is not
// derived (origin kNoNode).
inline NodeId joint_id(const Graph& g, NodeId id) {
  const NodeId origin = g.node(id).origin;
  return origin == kNoNode ? id : origin;
}

// joint_id of each of `ids`, in order.
std::vector<NodeId> joint_ids(const Graph& g, std::span<const NodeId> ids);

// The inverse over a derived graph: per joint id below `joint_size`, the node
// of `g` that stands for it, or kNoNode. Each joint node has at most one
// (prepared graphs only drop and merge nodes).
std::vector<NodeId> nodes_by_joint_id(const Graph& g, size_t joint_size);

}  // namespace remat
