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

}  // namespace

SubgraphSelection select_subgraph(const Graph& g, const std::vector<NodeId>& inputs,
                                  const std::vector<NodeId>& outputs, Subgraph which,
                                  bool impure_random, bool ignore_must_be_in_fw_bw) {
  const size_t n = g.size();
  std::vector<uint8_t> state(n, kUnseen);
  SubgraphSelection sel;
  sel.inputs = inputs;
  sel.created = inputs;
  for (NodeId id : inputs) {
    if (id >= n) {
      throw Error(ErrorCode::kInternal, fmt::format("select_subgraph: input #{} is not a node", id));
    }
    state[id] = kInput;
  }

  // Validity, in graph order: every argument is decided before its users.
  for (NodeId id = 0; id < n; ++id) {
    const bool is_input = state[id] == kInput;
    if (!ignore_must_be_in_fw_bw && !is_input) {
      if ((which != Subgraph::kBackward && must_be_in_backward(g, id)) ||
          (which != Subgraph::kForward && must_be_in_forward(g, id))) {
        state[id] = kInvalid;
        continue;
      }
    }
    if (is_input) continue;
    switch (g.node(id).kind) {
      case NodeKind::kPlaceholder:
        state[id] = kInvalid;
        break;
      case NodeKind::kCallFunction: {
        bool valid = true;
        for (NodeId in : g.inputs(id)) {
          if (state[in] == kInvalid) {
            valid = false;
            break;
          }
        }
        state[id] = valid ? kCopied : kInvalid;
        if (valid) sel.created.push_back(id);
        break;
      }
      case NodeKind::kGetAttr:
        state[id] = kCopied;
        sel.created.push_back(id);
        break;
      case NodeKind::kOutput:
        break;
    }
  }

  auto usable = [&](NodeId id) {
    return id != kNoNode && (state[id] == kInput || state[id] == kCopied);
  };

  // Outputs. An invalid one may stand for an input it aliases.
  sel.outputs.reserve(outputs.size());
  for (NodeId x : outputs) {
    if (x == kNoNode || usable(x)) {
      sel.outputs.push_back(x);
      continue;
    }
    if (x >= n || state[x] == kUnseen) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("output '{}' cannot be found in the subgraph",
                              x < n ? std::string(g.name(x)) : fmt::format("#{}", x)));
    }
    NodeId replacement = kNoNode;
    // A backward-only copy_ returns its destination, the original input.
    if (target_is(g, x, "aten.copy_.default") && must_be_in_backward(g, x)) {
      const NodeId dst = node_arg(g, x, 0);
      if (usable(dst)) replacement = dst;
    }
    // view/reshape(getitem(hop, key)), then getitem(hop, key) itself: the
    // input the higher-order op mutates under `key`.
    if (replacement == kNoNode &&
        (target_is(g, x, "aten.view.default") || target_is(g, x, "aten.reshape.default"))) {
      const NodeId source = node_arg(g, x, 0);
      if (source != kNoNode) {
        const NodeId original = ho_op_original_input(g, source);
        if (usable(original)) replacement = original;
      }
    }
    if (replacement == kNoNode) {
      const NodeId original = ho_op_original_input(g, x);
      if (usable(original)) replacement = original;
    }
    if (replacement == kNoNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}' was invalid, but is output", g.name(x)));
    }
    sel.outputs.push_back(replacement);
  }

  // Dead code: reverse walk over the copies. A copy lives when the output or
  // a live later copy uses it, or when it is impure (FX never erases those).
  std::vector<uint8_t> live(n, 0);
  for (NodeId x : sel.outputs) {
    if (x != kNoNode) live[x] = 1;
  }
  for (size_t k = sel.created.size(); k-- > inputs.size();) {
    const NodeId id = sel.created[k];
    if (!live[id] && !is_impure_node(g, id, impure_random)) continue;
    live[id] = 1;
    sel.body.push_back(id);
    for (NodeId in : g.inputs(id)) live[in] = 1;
  }
  std::reverse(sel.body.begin(), sel.body.end());
  return sel;
}

}  // namespace remat
