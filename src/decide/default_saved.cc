// decide/default_saved.cc — default_saved_values: the saved-value selection
// of torch's default_partition, which respects where ops were placed rather
// than optimizing.
//
// The forward is every node (tangents excluded) up to the last node tagged
// is_forward, or the last primal / forward seed. Each forward value with a
// use outside the forward is saved, except: symbolic values go to the sym
// list; a tensor whose backward uses are all symbolic (sizes/strides) saves
// those sym uses instead; opaque values go to their own list; multi-output
// nodes (every use a getitem) save their getitems instead; asserts and
// profiler spans are skipped; MUST/PREFER_RECOMPUTE values are not saved.
// MUST_SAVE and impure values are saved unconditionally.
//
// Orchestration (falling back to the min-cut when recompute tags meet a
// non-functional graph, cleanup of tags) belongs to the pipeline.
#include <string>

#include "decide/decide.h"
#include "graph/query.h"
#include "remat/error.h"

namespace remat {
namespace {

bool is_skipped_target(std::string_view t) {
  return t == "aten._assert_scalar.default" || t == "aten._assert_async.default" ||
         t == "aten._assert_async.msg" || t == "profiler._record_function_enter_new.default" ||
         t == "profiler._record_function_enter.default" ||
         t == "profiler._record_function_exit.default" ||
         t == "profiler._record_function_exit._RecordFunction";
}

// Keeps the first occurrence of each id, in order (dict.fromkeys).
void dedup(std::vector<NodeId>& v, std::vector<uint8_t>& mark) {
  size_t k = 0;
  for (NodeId n : v)
    if (!mark[n]) {
      mark[n] = 1;
      v[k++] = n;
    }
  v.resize(k);
  for (NodeId n : v) mark[n] = 0;
}

}  // namespace

SavedSets default_saved_values(const Graph& g, const NodeInfo& info, const PartitionOptions& options,
                               int graph_has_recomputable_ops) {
  (void)info;
  const size_t N = g.size();
  NodeId last = kNoNode;
  for (NodeId n = 0; n < N; ++n)
    if (g.node(n).tag == PartitionerTag::kIsForward || is_primal(g, n) || is_fwd_seed_offset(g, n))
      last = n;
  if (last == kNoNode)
    throw Error(ErrorCode::kInvalidGraph,
                "default partition: the graph has no forward node (no primal, forward seed or "
                "is_forward tag)");
  std::vector<uint8_t> forward(N, 0);
  for (NodeId n = 0; n <= last; ++n)
    if (!is_tangent(g, n) && g.node(n).kind != NodeKind::kOutput) forward[n] = 1;

  bool recomputable_ops = false;
  if (graph_has_recomputable_ops < 0) {
    for (NodeId n = 0; n < N; ++n) recomputable_ops |= must_recompute(g.node(n));
  } else {
    recomputable_ops = graph_has_recomputable_ops != 0;
  }

  SavedSets out;
  std::vector<NodeId> backward_uses;
  for (NodeId n = 0; n < N; ++n) {
    if (!forward[n]) continue;
    const Node& node = g.node(n);
    // torch skips get_attr nodes that name a submodule (HOP bodies). The IR
    // has no module table; such nodes carry no value metadata, tensors do.
    if (node.kind == NodeKind::kGetAttr && node.value == ValueKind::kMissing &&
        !node.has(kFlagTensorMeta))
      continue;
    const std::string_view target = target_name(g, n);
    if (is_skipped_target(target)) continue;
    if (is_sym_node(g, n)) {
      out.saved_sym_nodes.push_back(n);
      continue;
    }
    auto users = g.users(n);
    bool multi_output = !users.empty();
    for (NodeId u : users) multi_output &= target_name(g, u) == "operator.getitem";
    if (multi_output) continue;
    const bool opaque = is_opaque_node(g, n);
    if (node.recompute == RecomputePolicy::kMustSave) {
      (opaque ? out.saved_opaque_nodes : out.saved_values).push_back(n);
      continue;
    }
    const bool impure = node.has(kFlagImpure) && node.kind != NodeKind::kPlaceholder &&
                        (!options.distributed_available || target != "_c10d_functional.wait_tensor.default");
    if (impure) {
      if (recomputable_ops)
        throw Error(ErrorCode::kInvalidGraph, "Trying to apply AC on a graph with impure op: " +
                                                  std::string(g.name(n)) + ", " + std::string(target));
      (opaque ? out.saved_opaque_nodes : out.saved_values).push_back(n);
      continue;
    }
    if (opaque) {
      out.saved_opaque_nodes.push_back(n);
      continue;
    }
    const bool is_tensor = node.has(kFlagTensorMeta) || node.value == ValueKind::kTensor;
    if (!is_tensor && node.kind == NodeKind::kCallFunction)
      throw Error(ErrorCode::kInvalidGraph,
                  "default partition: expected node '" + std::string(g.name(n)) + "' to be a tensor");
    // Uses outside the forward (the output node counts as one).
    backward_uses.clear();
    bool all_sym = true;
    for (NodeId u : users)
      if (!forward[u]) {
        backward_uses.push_back(u);
        all_sym &= is_sym_node(g, u);
      }
    if (all_sym) {
      out.saved_sym_nodes.insert(out.saved_sym_nodes.end(), backward_uses.begin(), backward_uses.end());
      continue;
    }
    if (!must_recompute(node)) out.saved_values.push_back(n);
  }

  std::vector<uint8_t> mark(N, 0);
  dedup(out.saved_values, mark);
  dedup(out.saved_sym_nodes, mark);
  size_t k = 0;
  for (NodeId n : out.saved_sym_nodes)
    if (!is_assert_only_symbool(g, n)) out.saved_sym_nodes[k++] = n;
  out.saved_sym_nodes.resize(k);
  dedup(out.saved_opaque_nodes, mark);
  return out;
}

}  // namespace remat
