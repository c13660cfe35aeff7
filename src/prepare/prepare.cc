// prepare/prepare.cc — the prologues of the two partitioners.
//
// Contract: prepare_for_min_cut runs what min_cut_rematerialization_partition
// runs before classify_nodes: DCE (options.dce_impure_random), CSE when
// options.cse (keyed by backward_dependencies from 2.14 on),
// cleanup_recompute_tags(is_default=false) when the graph has recompute
// tags, force_save_collectives unless
// options.unsafe_allow_optimization_of_collectives, then the effectful-op and
// backward-mutation passes. prepare_for_default runs default_partition's
// share (cleanup with is_default=true, then the same force-save passes) on a
// graph that went through prepare_for_min_cut or was built directly.
// Neither appends to the pools of the graph it was given: prepare_for_min_cut
// layers its result's pools over them (Graph::layer_pools).
// is_functional_graph is the check default_partition runs before its
// prologue.
#include <string_view>
#include <vector>

#include "prepare/prepare.h"

namespace remat {
namespace {

void force_saves(Graph& g, const PartitionOptions& options, std::vector<NodeId>& forced) {
  if (!options.unsafe_allow_optimization_of_collectives) {
    force_save_collectives(g, options.torch, forced);
  }
  force_save_effectful_ops(g, options.torch, forced);
  force_save_bw_mutation_src(g, forced);
}

}  // namespace

std::vector<uint8_t> backward_dependencies(const Graph& g, int num_fwd_outputs) {
  std::vector<uint8_t> needed(g.size(), 0);
  std::vector<NodeId> stack;
  for (NodeId out : split_outputs(g, num_fwd_outputs).bwd) {
    if (out != kNoNode && g.node(out).kind != NodeKind::kOutput) stack.push_back(out);
  }
  while (!stack.empty()) {
    const NodeId id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = 1;
    for (NodeId in : g.inputs(id)) stack.push_back(in);
  }
  return needed;
}

Prepared prepare_for_min_cut(const Graph& joint, int num_fwd_outputs,
                             const PartitionOptions& options) {
  Prepared p;
  const size_t n = joint.size();
  p.graph = eliminate_dead_code(joint, impurity(options.dce_impure_random, options.torch));
  // From here on the joint graph's pools are only read: what this partition
  // adds goes into layers of its own (partitions of one graph may overlap).
  p.graph.layer_pools();
  // survivor: each input node -> itself when DCE kept it.
  p.survivor.assign(n, kNoNode);
  for (NodeId id = 0; id < p.graph.size(); ++id) {
    const NodeId in = joint_id(p.graph, id);
    if (in < n) p.survivor[in] = in;
  }
  if (options.cse) {
    // The DCE'd nodes as input ids, kept so the graph itself can be moved
    // into CSE (which then returns it uncopied when it merges nothing).
    std::vector<NodeId> before(p.graph.size());
    for (NodeId id = 0; id < p.graph.size(); ++id) before[id] = joint_id(p.graph, id);
    // 2.14 on, a value the backward needs never merges with one it does not:
    // a forward-only computation (under no_grad, say) absorbing the
    // backward's equal one would make the min-cut save it. 2.13 and before
    // merge them.
    std::vector<uint8_t> key;
    if (options.torch.cse_partition_key) key = backward_dependencies(p.graph, num_fwd_outputs);
    std::vector<NodeId> replaced;
    p.graph = common_subexpression_elimination(std::move(p.graph), replaced, options.torch, key);
    for (NodeId id = 0; id < before.size(); ++id) {
      if (before[id] < n) p.survivor[before[id]] = before[replaced[id]];
    }
  }
  p.had_recomputable_ops = has_recomputable_ops(p.graph);
  p.had_recomputable_rng_ops = has_recomputable_rng_ops(p.graph, options.torch);
  if (p.had_recomputable_ops) {
    cleanup_recompute_tags(p.graph, /*is_default_partition=*/false, p.forced_must_save);
  }
  force_saves(p.graph, options, p.forced_must_save);
  return p;
}

void prepare_for_default(Prepared& p, const PartitionOptions& options) {
  p.had_recomputable_ops = has_recomputable_ops(p.graph);
  p.had_recomputable_rng_ops = has_recomputable_rng_ops(p.graph, options.torch);
  if (p.had_recomputable_ops) {
    cleanup_recompute_tags(p.graph, /*is_default_partition=*/true, p.forced_must_save);
  }
  force_saves(p.graph, options, p.forced_must_save);
}

bool is_functional_graph(const Graph& g, const TorchBehavior& torch) {
  std::vector<uint8_t> is_placeholder(g.size(), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::kPlaceholder) is_placeholder[id] = 1;
    const OpInfo* op = g.op(id);
    if (op == nullptr || op->kind != OpKind::kOverload) continue;
    std::string_view name = g.str(op->name);
    // 2.14 added aten.shallow_copy_data_ (the epilogue of `inp.data = new`)
    // to the mutations into inputs a functional graph may hold; before, it
    // is an ordinary mutable op (which 2.13 does not have anyway).
    const bool allowed = name == "aten.copy_.default" || name == "aten.set_.source_Tensor" ||
                         name == "fsdp.copy_.default" ||
                         (torch.functional_graph_allows_shallow_copy_data &&
                          name == "aten.shallow_copy_data_.default");
    if (allowed) {
      // The first argument must be an input (a name containing
      // "set_buffer_donor_" is exempt, as in torch).
      const ArgId first = positional(g, id, 0);
      if (first == kNoArg) continue;
      const Arg& dst = g.arg(first);
      if (dst.kind != ArgKind::kNode) return false;
      if (g.name(dst.id).find("set_buffer_donor_") != std::string_view::npos) continue;
      if (!is_placeholder[dst.id]) return false;
    } else if (op->is_mutable) {
      return false;
    }
  }
  return true;
}

}  // namespace remat
