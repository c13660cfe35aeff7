// graph/subgraph.cc — select_subgraph: torch's
// `_extract_graph_with_inputs_outputs` followed by the
// `eliminate_dead_code()` it ends with, computed as a selection of node ids.
//
// Contract (subgraph.h): one forward walk decides validity (an input is
// valid; a placeholder that is not an input, or a node placed in the other
// subgraph, is invalid; a call_function is valid when all its node arguments
// are; get_attr nodes are always copied); outputs are resolved, with the three
// replacement rules torch applies to invalid outputs; one backward walk then
// removes dead copies exactly as FX's reverse DCE does. Both walks are linear.
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

enum State : uint8_t { kUnseen, kInvalid, kInput, kCopied };

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

// The forward walk's verdicts: each node's state, and the nodes copied
// into the subgraph (the inputs first, then copies in graph order).
struct Validity {
  std::vector<uint8_t> state;
  std::vector<NodeId> created;

  bool usable(NodeId id) const {
    return id != kNoNode && (state[id] == kInput || state[id] == kCopied);
  }
};

// A node that is no input is invalid when it must be in the other subgraph.
bool belongs_elsewhere(const Graph& g, NodeId id, Subgraph which) {
  return (which != Subgraph::kBackward && must_be_in_backward(g, id)) ||
         (which != Subgraph::kForward && must_be_in_forward(g, id));
}

// Validity, in graph order: every argument is decided before its users.
Validity mark_validity(const Graph& g, const std::vector<NodeId>& inputs, Subgraph which,
                       bool ignore_must_be_in_fw_bw) {
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
    if (v.usable(dst)) return dst;
  }
  // view/reshape(getitem(hop, key)), then getitem(hop, key) itself: the
  // input the higher-order op mutates under `key`.
  if (target_is(g, x, "aten.view.default") || target_is(g, x, "aten.reshape.default")) {
    const NodeId source = node_arg(g, x, 0);
    if (source != kNoNode) {
      const NodeId original = ho_op_original_input(g, source);
      if (v.usable(original)) return original;
    }
  }
  const NodeId original = ho_op_original_input(g, x);
  if (v.usable(original)) return original;
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
      out.push_back(x);
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
std::vector<NodeId> live_copies(const Graph& g, const std::vector<NodeId>& created,
                                size_t num_inputs, const std::vector<NodeId>& outputs,
                                bool impure_random) {
  std::vector<uint8_t> live(g.size(), 0);
  for (NodeId x : outputs) {
    if (x != kNoNode) live[x] = 1;
  }
  std::vector<NodeId> body;
  for (size_t k = created.size(); k-- > num_inputs;) {
    const NodeId id = created[k];
    if (!live[id] && !is_impure_node(g, id, impure_random)) continue;
    live[id] = 1;
    body.push_back(id);
    for (NodeId in : g.inputs(id)) live[in] = 1;
  }
  std::reverse(body.begin(), body.end());
  return body;
}

}  // namespace

SubgraphSelection select_subgraph(const Graph& g, const std::vector<NodeId>& inputs,
                                  const std::vector<NodeId>& outputs, Subgraph which,
                                  bool impure_random, bool ignore_must_be_in_fw_bw) {
  Validity v = mark_validity(g, inputs, which, ignore_must_be_in_fw_bw);
  SubgraphSelection sel;
  sel.inputs = inputs;
  sel.outputs = resolve_outputs(g, v, outputs);
  sel.body = live_copies(g, v.created, inputs.size(), sel.outputs, impure_random);
  sel.created = std::move(v.created);
  return sel;
}

}  // namespace remat
