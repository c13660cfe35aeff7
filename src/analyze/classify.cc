// analyze/classify.cc — classify_nodes, dist_from_bw and split_outputs
// (analyze.h).
//
// Contract: classify_nodes is partitioners.classify_nodes:
//  * required_bw: tangent placeholders and must-be-in-backward nodes, closed
//    over users (one forward walk: a node's users come after it);
//    tangents_closure is that set; required_bw then also gets the backward
//    outputs.
//  * inputs: primal placeholders, then forward seed/offset placeholders.
//  * required_fw: the nodes of the forward-only graph extracted from the
//    inputs to the forward outputs (select_subgraph, with DCE).
//  * unclaimed: neither; static_lifetime: primals at the given indices.
// All sets are per-node flags; fw_order numbers required_fw in graph order.
#include <fmt/format.h>

#include "analyze/analyze.h"
#include "graph/subgraph.h"
#include "remat/error.h"

namespace remat {

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

NodeInfo classify_nodes(const Graph& g, const std::vector<int>& static_lifetime_input_indices,
                        int num_fwd_outputs, const PartitionOptions& options) {
  const size_t n = g.size();
  NodeInfo info;
  info.required_bw.assign(n, 0);
  for (NodeId id = 0; id < n; ++id) {
    if (is_tangent(g, id) || must_be_in_backward(g, id)) info.required_bw[id] = 1;
    if (info.required_bw[id]) {
      for (NodeId u : g.users(id)) info.required_bw[u] = 1;
    }
  }
  info.tangents_closure = info.required_bw;

  const OutputLeaves outputs = split_outputs(g, num_fwd_outputs);
  for (NodeId o : outputs.bwd) {
    if (o != kNoNode && g.node(o).kind != NodeKind::kOutput) info.required_bw[o] = 1;
  }

  std::vector<NodeId> primals;
  for (NodeId id = 0; id < n; ++id) {
    if (is_primal(g, id)) primals.push_back(id);
  }
  info.inputs = primals;
  for (NodeId id = 0; id < n; ++id) {
    if (is_fwd_seed_offset(g, id)) info.inputs.push_back(id);
  }

  const SubgraphSelection fw = select_subgraph(g, info.inputs, outputs.fwd, Subgraph::kForward,
                                               options.dce_impure_random);
  info.required_fw.assign(n, 0);
  for (NodeId id : fw.inputs) info.required_fw[id] = 1;
  for (NodeId id : fw.body) info.required_fw[id] = 1;

  info.unclaimed.assign(n, 0);
  info.fw_order.assign(n, -1);
  int32_t order = 0;
  for (NodeId id = 0; id < n; ++id) {
    if (info.required_bw[id]) ++info.num_required_bw;
    if (info.required_fw[id]) {
      info.fw_order[id] = order++;
      info.required_fw_nodes.push_back(id);
    } else if (!info.required_bw[id]) {
      info.unclaimed[id] = 1;
    }
  }

  info.static_lifetime.assign(n, 0);
  for (int i : static_lifetime_input_indices) {
    if (i < 0 || static_cast<size_t>(i) >= primals.size()) {
      // torch's membership test silently ignores indices with no primal.
      continue;
    }
    info.static_lifetime[primals[i]] = 1;
  }
  return info;
}

std::vector<int64_t> dist_from_bw(const Graph& g, const NodeInfo& info) {
  const size_t n = g.size();
  std::vector<int64_t> dist(n, kFarFromBackward);
  for (NodeId id = static_cast<NodeId>(n); id-- > 0;) {
    if (g.node(id).kind == NodeKind::kOutput) continue;
    if (!info.is_required_fw(id)) {
      dist[id] = 0;
      continue;
    }
    int64_t d = kFarFromBackward;
    for (NodeId u : g.users(id)) d = std::min(d, dist[u] + 1);
    dist[id] = d;
  }
  return dist;
}

}  // namespace remat
