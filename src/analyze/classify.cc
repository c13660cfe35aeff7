// analyze/classify.cc — classify_nodes and dist_from_bw (analyze.h).
//
// Contract: classify_nodes is partitioners.classify_nodes:
//  * required_bw: tangent placeholders and must-be-in-backward nodes, closed
//    over users (one forward walk: a node's users come after it);
//    tangents_closure is that set; required_bw then also gets the backward
//    outputs. From torch 2.14 (control_deps_extraction) a required control_deps
//    call passes the mark to a getitem of one of its dependencies only when
//    that dependency is required itself (its other users always).
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

namespace {

// Whether required_bw passes from `id` to its user `u`. torch 2.14 on, a
// control_deps call, which carries forward and backward values through,
// passes it to getitem(cd, k) only when deps[k - 1] is required itself.
bool passes_required_bw(const Graph& g, NodeId id, NodeId u, const std::vector<uint8_t>& required_bw,
                        bool control_deps_rules) {
  if (!control_deps_rules || !is_control_deps(g, id)) return true;
  const std::optional<int64_t> k = getitem_index(g, u);
  const size_t args = g.children(g.node(id).args).size();
  const size_t deps = args >= 2 ? args - 2 : 0;
  if (!k || *k < 1 || static_cast<size_t>(*k) > deps) return true;  // chained deps and the like
  const NodeId dep = control_deps_dep(g, id, *k);
  return dep != kNoNode && required_bw[dep];
}

}  // namespace

NodeInfo classify_nodes(const Graph& g, const std::vector<int>& static_lifetime_input_indices,
                        int num_fwd_outputs, const PartitionOptions& options) {
  const size_t n = g.size();
  const bool control_deps_rules = options.torch.control_deps_extraction;
  NodeInfo info;
  info.required_bw.assign(n, 0);
  for (NodeId id = 0; id < n; ++id) {
    if (is_tangent(g, id) || must_be_in_backward(g, id)) info.required_bw[id] = 1;
    if (!info.required_bw[id]) continue;
    for (NodeId u : g.users(id)) {
      if (passes_required_bw(g, id, u, info.required_bw, control_deps_rules)) info.required_bw[u] = 1;
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
                                               impurity(options.dce_impure_random, options.torch),
                                               false, options.torch.control_deps_extraction);
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

std::vector<uint8_t> backward_only(const Graph& g, const NodeInfo& info) {
  std::vector<uint8_t> out(g.size(), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    uint8_t b = info.tangents_closure[id] || is_bwd_seed_offset(g, id);
    for (NodeId in : g.inputs(id)) b |= out[in];
    out[id] = b;
  }
  return out;
}

}  // namespace remat
