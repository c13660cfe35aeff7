// decide/default_saved.cc — default_saved_values: the saved-value selection
// of torch's default_partition, which respects where ops were placed rather
// than optimizing.
//
// The forward is every node (tangents excluded) up to the last node tagged
// is_forward, or the last primal / forward seed. Each forward value with a
// use outside the forward is saved, except: symbolic values go to the sym
// list; a tensor whose backward uses are all symbolic (sizes/strides) saves
// those sym uses instead; opaque values go to their own list (2.12 on);
// multi-output nodes (every use a getitem) save their getitems instead;
// asserts and profiler spans are skipped; MUST/PREFER_RECOMPUTE values are
// not saved. MUST_SAVE and impure values are saved unconditionally. What
// differs between releases is read from options.torch where it applies.
//
// Orchestration (falling back to the min-cut when recompute tags meet a
// non-functional graph, cleanup of tags) belongs to the pipeline.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decide/decide.h"
#include "graph/query.h"
#include "remat/error.h"

namespace remat {
namespace {

// Targets the loop passes over: runtime asserts and profiler spans, safe to
// duplicate into the backward. 2.12 and older do not skip _assert_async,
// which is then an impure value (saved, or an error under recompute tags).
bool is_skipped_target(std::string_view t, const TorchBehavior& torch) {
  if (t == "aten._assert_async.default" || t == "aten._assert_async.msg")
    return torch.default_skips_assert_async;
  return t == "aten._assert_scalar.default" || t == "profiler._record_function_enter_new.default" ||
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

// The forward: every node (tangents and the output excluded) up to the last
// node tagged is_forward, or the last primal or forward seed.
std::vector<uint8_t> forward_region(const Graph& g) {
  NodeId last = kNoNode;
  for (NodeId n = 0; n < g.size(); ++n)
    if (g.node(n).tag == PartitionerTag::kIsForward || is_primal(g, n) || is_fwd_seed_offset(g, n))
      last = n;
  if (last == kNoNode)
    throw Error(ErrorCode::kInvalidGraph,
                "default partition: the graph has no forward node (no primal, forward seed or "
                "is_forward tag)");
  std::vector<uint8_t> forward(g.size(), 0);
  for (NodeId n = 0; n <= last; ++n)
    if (!is_tangent(g, n) && g.node(n).kind != NodeKind::kOutput) forward[n] = 1;
  return forward;
}

// One forward node's verdict at a time, into the three lists.
class DefaultSelection {
 public:
  DefaultSelection(const Graph& g, const PartitionOptions& options, bool recomputable_ops)
      : g_(g), options_(options), recomputable_ops_(recomputable_ops), forward_(forward_region(g)) {}

  SavedSets run() {
    for (NodeId n = 0; n < g_.size(); ++n)
      if (forward_[n]) visit(n);
    finish();
    return std::move(out_);
  }

 private:
  void visit(NodeId n) {
    const Node& node = g_.node(n);
    // torch skips get_attr nodes that name a submodule (HOP bodies). The IR
    // has no module table; such nodes carry no value metadata, tensors do.
    if (node.kind == NodeKind::kGetAttr && node.value == ValueKind::kMissing &&
        !node.has(kFlagTensorMeta))
      return;
    const std::string_view target = target_name(g_, n);
    if (is_skipped_target(target, options_.torch)) return;
    if (is_sym_node(g_, n)) {
      out_.saved_sym_nodes.push_back(n);
      return;
    }
    bool multi_output = !g_.users(n).empty();
    for (NodeId u : g_.users(n)) multi_output &= target_name(g_, u) == "operator.getitem";
    if (multi_output) return;  // its getitems are visited instead
    const bool opaque = is_opaque_node(g_, n, options_.torch);
    if (node.recompute == RecomputePolicy::kMustSave || is_impure(n, target)) {
      (opaque ? out_.saved_opaque_nodes : out_.saved_values).push_back(n);
      return;
    }
    if (opaque) {
      out_.saved_opaque_nodes.push_back(n);
      return;
    }
    visit_tensor(n);
  }

  // Impure values are saved unconditionally, and activation checkpointing
  // (recompute tags) cannot apply to a graph holding one. A collective's
  // wait is not impure here when torch.distributed is available.
  bool is_impure(NodeId n, std::string_view target) const {
    const Node& node = g_.node(n);
    const bool impure = node.has(kFlagImpure) && node.kind != NodeKind::kPlaceholder &&
                        (!options_.distributed_available ||
                         !is_collective_wait(g_, n, options_.torch));
    if (impure && recomputable_ops_)
      throw Error(ErrorCode::kInvalidGraph, "Trying to apply AC on a graph with impure op: " +
                                                std::string(g_.name(n)) + ", " + std::string(target));
    return impure;
  }

  // A tensor with uses outside the forward (the output node counts as one):
  // saved, unless every such use is symbolic (then those are saved) or it
  // must be recomputed.
  void visit_tensor(NodeId n) {
    const Node& node = g_.node(n);
    const bool is_tensor = node.has(kFlagTensorMeta) || node.value == ValueKind::kTensor;
    if (!is_tensor && node.kind == NodeKind::kCallFunction)
      throw Error(ErrorCode::kInvalidGraph,
                  "default partition: expected node '" + std::string(g_.name(n)) + "' to be a tensor");
    backward_uses_.clear();
    bool all_sym = true;
    for (NodeId u : g_.users(n))
      if (!forward_[u]) {
        backward_uses_.push_back(u);
        all_sym &= is_sym_node(g_, u);
      }
    if (all_sym) {
      out_.saved_sym_nodes.insert(out_.saved_sym_nodes.end(), backward_uses_.begin(),
                                  backward_uses_.end());
    } else if (!must_recompute(node)) {
      out_.saved_values.push_back(n);
    }
  }

  // First occurrences only, in order; from 2.13 on, sym values that only
  // feed asserts go (2.12 saves them, and the backward runs the assert on
  // the saved value).
  void finish() {
    std::vector<uint8_t> mark(g_.size(), 0);
    dedup(out_.saved_values, mark);
    dedup(out_.saved_sym_nodes, mark);
    if (options_.torch.default_skips_assert_only_symbool) {
      size_t k = 0;
      for (NodeId n : out_.saved_sym_nodes)
        if (!is_assert_only_symbool(g_, n)) out_.saved_sym_nodes[k++] = n;
      out_.saved_sym_nodes.resize(k);
    }
    dedup(out_.saved_opaque_nodes, mark);
  }

  const Graph& g_;
  const PartitionOptions& options_;
  const bool recomputable_ops_;
  const std::vector<uint8_t> forward_;
  std::vector<NodeId> backward_uses_;
  SavedSets out_;
};

}  // namespace

SavedSets default_saved_values(const Graph& g, const NodeInfo& info, const PartitionOptions& options,
                               std::optional<bool> graph_has_recomputable_ops) {
  (void)info;
  bool recomputable_ops = false;
  if (graph_has_recomputable_ops) {
    recomputable_ops = *graph_has_recomputable_ops;
  } else {
    for (NodeId n = 0; n < g.size(); ++n) recomputable_ops |= must_recompute(g.node(n));
  }
  return DefaultSelection(g, options, recomputable_ops).run();
}

}  // namespace remat
