// graph/subgraph.cc — select_subgraph: torch's
// `_extract_graph_with_inputs_outputs` followed by the
// `eliminate_dead_code()` it ends with, computed as a selection of node ids.
//
// Contract (subgraph.h): one forward walk decides validity (an input is
// valid; a placeholder that is not an input, or a node placed in the other
// subgraph, is invalid; a call_function is valid when all its node arguments
// are; get_attr nodes are always copied; torch 2.14's control_deps rules
// drop forward syncs from the backward, their getitems standing for their
// dependencies); outputs are resolved, with the three replacement rules
// torch applies to invalid outputs; one backward walk then removes dead
// copies exactly as FX's reverse DCE does. Both walks are linear.
#include "graph/subgraph.h"

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "graph/impure.h"
#include "graph/query.h"
#include "remat/error.h"

namespace remat {
namespace {

// kAliased: a node that stands for another (Validity::stands_for).
enum State : uint8_t { kUnseen, kInvalid, kInput, kCopied, kAliased };

// `_get_ho_op_original_input`: for getitem(hop, key) where the higher-order
// op's kwargs["kwargs"][key] is a node, that node. Keys are strings here
// (the kwargs dict of a HOP is keyed by argument name).
NodeId ho_op_original_input(const Graph& g, NodeId getitem) {
  if (g.node(getitem).kind != NodeKind::kCallFunction) return kNoNode;
  if (!target_is(g, getitem, "operator.getitem")) return kNoNode;
  const NodeId ho = node_arg(g, getitem, 0);
  const ArgId key = positional(g, getitem, 1);
  if (ho == kNoNode || key == kNoArg) return kNoNode;
  if (g.node(ho).kind != NodeKind::kCallFunction) return kNoNode;
  const ArgId inner = dict_lookup(g, g.node(ho).kwargs, "kwargs");
  if (inner == kNoArg || g.arg(key).kind != ArgKind::kStr) return kNoNode;
  return arg_node(g, dict_lookup(g, inner, g.str(g.arg(key).id)));
}

// The forward walk's verdicts: each node's state, the nodes copied into the
// subgraph (the inputs first, then copies in graph order), and what the
// kAliased ones stand for.
struct Validity {
  std::vector<uint8_t> state;
  std::vector<NodeId> created;
  std::vector<NodeId> stands_for;  // sized on the first alias

  bool usable(NodeId id) const {
    return id != kNoNode && (state[id] == kInput || state[id] == kCopied || state[id] == kAliased);
  }
  // The node whose copy holds id's value, or kNoNode when it has none.
  NodeId value(NodeId id) const {
    if (!usable(id)) return kNoNode;
    return state[id] == kAliased ? stands_for[id] : id;
  }
  void alias(NodeId id, NodeId to) {
    if (stands_for.empty()) stands_for.assign(state.size(), kNoNode);
    stands_for[id] = to;
    state[id] = kAliased;
  }
};

// A node that is no input is invalid when it must be in the other subgraph.
bool belongs_elsewhere(const Graph& g, NodeId id, Subgraph which) {
  return (which != Subgraph::kBackward && must_be_in_backward(g, id)) ||
         (which != Subgraph::kForward && must_be_in_forward(g, id));
}

const char* subgraph_name(Subgraph which) {
  switch (which) {
    case Subgraph::kForward: return "forward";
    case Subgraph::kBackward: return "backward";
    case Subgraph::kNeither: break;
  }
  return "extracted";
}

// torch 2.14's forward sync, which backward extraction drops: a
// control_deps call not tagged for the backward whose subgraph syncs streams.
bool is_forward_sync(const Graph& g, NodeId id) {
  const PartitionerTag tag = g.node(id).tag;
  return is_control_deps(g, id) && g.node(id).has(kFlagStreamSync) &&
         tag != PartitionerTag::kIsBackward && tag != PartitionerTag::kMustBeInBackward;
}

// torch 2.14 rebuilds a control_deps call with some invalid argument but a
// valid dependency (args[2:]) as a new call of a new subgraph module it
// installs on the joint module; remat does not.
void refuse_partial_control_deps(const Graph& g, NodeId id, const Validity& v, Subgraph which) {
  const ArgId root = g.node(id).args;
  const ArgId stop = root + g.arg(root).span;
  size_t k = 0;
  for (ArgId c = root + 1; c < stop; c += g.arg(c).span, ++k) {
    const NodeId dep = k >= 2 ? arg_node(g, c) : kNoNode;
    if (dep == kNoNode || v.state[dep] == kInvalid) continue;
    throw Error(ErrorCode::kUnsupported,
                fmt::format("node '{}': torch 2.14's extraction of the {} graph rebuilds this "
                            "control_deps with only the dependencies available there (as a call "
                            "of a new subgraph module, subgraph_cd_extract..., installed on the "
                            "joint module); remat does not reproduce that rebuild",
                            g.name(id), subgraph_name(which)));
  }
}

// A call_function's verdict under torch 2.14's control_deps rules; returns
// false when they do not apply to it. `see_through` marks the dropped
// forward syncs, whose getitems stand for their dependencies.
bool control_deps_verdict(const Graph& g, NodeId id, Subgraph which, Validity& v,
                          std::vector<uint8_t>& see_through) {
  if (target_is(g, id, "operator.getitem")) {
    const NodeId cd = node_arg(g, id, 0);
    if (cd == kNoNode || !see_through[cd]) return false;
    const std::optional<int64_t> k = getitem_index(g, id);
    const NodeId dep = k ? v.value(control_deps_dep(g, cd, *k)) : kNoNode;
    if (dep != kNoNode) v.alias(id, dep);
    else v.state[id] = kInvalid;
    return true;
  }
  if (!is_control_deps(g, id)) return false;
  if (which == Subgraph::kBackward && is_forward_sync(g, id)) {
    see_through[id] = 1;
    v.state[id] = kInvalid;
    return true;
  }
  const auto ins = g.inputs(id);
  if (std::any_of(ins.begin(), ins.end(), [&](NodeId in) { return v.state[in] == kInvalid; })) {
    refuse_partial_control_deps(g, id, v, which);
  }
  return false;
}

// Validity, in graph order: every argument is decided before its users.
Validity mark_validity(const Graph& g, const std::vector<NodeId>& inputs, Subgraph which,
                       bool ignore_must_be_in_fw_bw, bool control_deps) {
  const size_t n = g.size();
  Validity v;
  v.state.assign(n, kUnseen);
  v.created = inputs;
  for (NodeId id : inputs) {
    if (id >= n) {
      throw Error(ErrorCode::kInternal, fmt::format("select_subgraph: input #{} is not a node", id));
    }
    v.state[id] = kInput;
  }
  std::vector<uint8_t> see_through(control_deps ? n : 0, 0);
  for (NodeId id = 0; id < n; ++id) {
    if (v.state[id] == kInput) continue;
    if (!ignore_must_be_in_fw_bw && belongs_elsewhere(g, id, which)) {
      v.state[id] = kInvalid;
      continue;
    }
    switch (g.node(id).kind) {
      case NodeKind::kPlaceholder:
        v.state[id] = kInvalid;
        break;
      case NodeKind::kCallFunction: {
        if (control_deps && control_deps_verdict(g, id, which, v, see_through)) break;
        const auto ins = g.inputs(id);
        const bool valid = std::none_of(ins.begin(), ins.end(),
                                        [&](NodeId in) { return v.state[in] == kInvalid; });
        v.state[id] = valid ? kCopied : kInvalid;
        if (valid) v.created.push_back(id);
        break;
      }
      case NodeKind::kGetAttr:
        v.state[id] = kCopied;
        v.created.push_back(id);
        break;
      case NodeKind::kOutput:
        break;
    }
  }
  return v;
}

// What stands for the invalid output `x`: the input it aliases, by torch's
// three rules; an Error when none applies.
NodeId replacement_output(const Graph& g, const Validity& v, NodeId x) {
  // A backward-only copy_ returns its destination, the original input.
  if (target_is(g, x, "aten.copy_.default") && must_be_in_backward(g, x)) {
    const NodeId dst = node_arg(g, x, 0);
    if (v.usable(dst)) return v.value(dst);
  }
  // view/reshape(getitem(hop, key)), then getitem(hop, key) itself: the
  // input the higher-order op mutates under `key`.
  if (target_is(g, x, "aten.view.default") || target_is(g, x, "aten.reshape.default")) {
    const NodeId source = node_arg(g, x, 0);
    if (source != kNoNode) {
      const NodeId original = ho_op_original_input(g, source);
      if (v.usable(original)) return v.value(original);
    }
  }
  const NodeId original = ho_op_original_input(g, x);
  if (v.usable(original)) return v.value(original);
  throw Error(ErrorCode::kInvalidGraph, fmt::format("node '{}' was invalid, but is output", g.name(x)));
}

// Outputs. An invalid one may stand for an input it aliases.
std::vector<NodeId> resolve_outputs(const Graph& g, const Validity& v,
                                    const std::vector<NodeId>& outputs) {
  const size_t n = g.size();
  std::vector<NodeId> out;
  out.reserve(outputs.size());
  for (NodeId x : outputs) {
    if (x == kNoNode || v.usable(x)) {
      out.push_back(x == kNoNode ? x : v.value(x));
      continue;
    }
    if (x >= n || v.state[x] == kUnseen) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("output '{}' cannot be found in the subgraph",
                              x < n ? std::string(g.name(x)) : fmt::format("#{}", x)));
    }
    out.push_back(replacement_output(g, v, x));
  }
  return out;
}

// Dead code: reverse walk over the copies (created after its first
// `num_inputs` entries). A copy lives when the output or a live later copy
// uses it, or when it is impure (FX never erases those). Returns the live
// copies in graph order.
std::vector<NodeId> live_copies(const Graph& g, const Validity& v, size_t num_inputs,
                                const std::vector<NodeId>& outputs, Impurity impurity) {
  const std::vector<NodeId>& created = v.created;
  std::vector<uint8_t> live(g.size(), 0);
  for (NodeId x : outputs) {
    if (x != kNoNode) live[x] = 1;
  }
  std::vector<NodeId> body;
  for (size_t k = created.size(); k-- > num_inputs;) {
    const NodeId id = created[k];
    if (!live[id] && !is_impure_node(g, id, impurity)) continue;
    live[id] = 1;
    body.push_back(id);
    for (NodeId in : g.inputs(id)) {
      const NodeId x = v.value(in);
      if (x != kNoNode) live[x] = 1;
    }
  }
  std::reverse(body.begin(), body.end());
  return body;
}

}  // namespace

SubgraphSelection select_subgraph(const Graph& g, const std::vector<NodeId>& inputs,
                                  const std::vector<NodeId>& outputs, Subgraph which,
                                  Impurity impurity, bool ignore_must_be_in_fw_bw,
                                  bool control_deps_extraction) {
  Validity v = mark_validity(g, inputs, which, ignore_must_be_in_fw_bw, control_deps_extraction);
  SubgraphSelection sel;
  sel.inputs = inputs;
  sel.outputs = resolve_outputs(g, v, outputs);
  sel.body = live_copies(g, v, inputs.size(), sel.outputs, impurity);
  sel.created = std::move(v.created);
  sel.stands_for = std::move(v.stands_for);
  return sel;
}

}  // namespace remat
