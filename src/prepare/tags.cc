// prepare/tags.cc — the recompute-policy passes of partitioners.py:
// cleanup_recompute_tags, force_save_collectives, force_save_effectful_ops,
// force_save_bw_mutation_src, and has_recomputable_ops / _rng_ops.
//
// Contract: each pass only changes recompute policies, in place, in the
// order torch visits nodes (force_save_effectful_ops raises torch 2.15's
// error, as an Error of kind invalid_graph with torch's text, for an
// effectful op tagged MUST_RECOMPUTE). A node whose policy becomes
// MUST_SAVE (and was not already) is appended to `forced` as its
// input-graph id (its origin, or its own id in a graph without origins); so
// `forced` never holds a node twice.
#include <string>
#include <string_view>
#include <vector>

#include "graph/random_op.h"
#include "prepare/prepare.h"
#include "remat/error.h"

namespace remat {
namespace {

void force_must_save(Graph& g, NodeId id, std::vector<NodeId>& forced) {
  if (g.node(id).recompute == RecomputePolicy::kMustSave) return;
  g.set_recompute(id, RecomputePolicy::kMustSave);
  forced.push_back(joint_id(g, id));
}

// partitioners.is_getitem_of_multi_output: a getitem whose parent has no
// tensor_meta.
bool is_getitem_of_multi_output(const Graph& g, NodeId id) {
  if (!target_is(g, id, "operator.getitem")) return false;
  const NodeId parent = node_arg(g, id, 0);
  return parent != kNoNode && !g.node(parent).has(kFlagTensorMeta);
}

// torch 2.15's RuntimeError, word for word: the drop-in raises what torch raises.
constexpr std::string_view kEffectfulMustRecompute =
    "AOTAutograd does not support MUST_RECOMPUTE for effectful operations because forward "
    "effects cannot join the backward effect-token chain.";

bool any_user_must_recompute(const Graph& g, NodeId id) {
  for (NodeId u : g.users(id)) {
    if (must_recompute(g.node(u))) return true;
  }
  return false;
}

// force_save_collectives' mark_leaf_tensor_outputs (2.15): the getitems
// that take a collective's outputs apart, recursively, are saved instead of
// the collective; a node without getitem users is saved unless its value is
// a list or tuple.
void save_leaf_outputs(Graph& g, NodeId id, std::vector<NodeId>& forced) {
  bool has_getitems = false;
  for (NodeId u : g.users(id)) {
    if (!target_is(g, u, "operator.getitem")) continue;
    has_getitems = true;
    save_leaf_outputs(g, u, forced);  // as deep as the value's tuples nest
  }
  if (!has_getitems && g.node(id).value != ValueKind::kSequence) force_must_save(g, id, forced);
}

}  // namespace

bool has_recomputable_ops(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (must_recompute(n)) return true;
  }
  return false;
}

bool has_recomputable_rng_ops(const Graph& g, const TorchBehavior& torch) {
  // hasattr(target, "tags"): OpOverloads (and packets) only. Which of them
  // are random is is_rng_op's (2.14 on: not attention without dropout).
  for (NodeId id = 0; id < g.size(); ++id) {
    const OpInfo* op = g.op(id);
    if (must_recompute(g.node(id)) && op != nullptr && op->kind == OpKind::kOverload &&
        is_rng_op(g, id, torch)) {
      return true;
    }
  }
  return false;
}

void cleanup_recompute_tags(Graph& g, bool is_default_partition, std::vector<NodeId>& forced) {
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (must_recompute(n)) {
      // The last node of a checkpointed block that feeds a later block is
      // stashed at the boundary.
      for (NodeId u : g.users(id)) {
        const Node& user = g.node(u);
        if (must_recompute(user) && user.has(kFlagAcGraphId) && n.has(kFlagAcGraphId) &&
            g.extra(u).ac_graph_id > g.extra(id).ac_graph_id) {
          force_must_save(g, id, forced);
        }
      }
      // An AC region output with a backward hook is saved to break the
      // hook's circular dependency. Users are checked after the loop above.
      if (g.node(id).has(kFlagBackwardHook) && !any_user_must_recompute(g, id)) {
        force_must_save(g, id, forced);
      }
    } else if (is_default_partition && !n.has(kFlagAcGraphId) &&
               any_user_must_recompute(g, id)) {
      // An input of an AC region is saved (default partitioner only), except
      // a getitem of a multi-output node that belongs to a region.
      if (is_getitem_of_multi_output(g, id)) {
        const NodeId parent = node_arg(g, id, 0);
        if (g.node(parent).has(kFlagAcGraphId)) continue;
      }
      force_must_save(g, id, forced);
    }
  }
}

void force_save_collectives(Graph& g, const TorchBehavior& torch, std::vector<NodeId>& forced) {
  for (NodeId id = 0; id < g.size(); ++id) {
    const OpInfo* op = g.op(id);
    if (op == nullptr || op->kind != OpKind::kOverload || g.str(op->ns) != "_c10d_functional" ||
        must_recompute(g.node(id))) {
      continue;
    }
    // 2.15 saves what a multi-output collective's getitems take out of it
    // (the collective itself then stays a candidate of the memory budget's
    // knapsack); up to 2.14 the collective itself is saved, whatever it
    // returns. Single-output collectives are saved either way.
    if (torch.collective_leaf_getitems) {
      save_leaf_outputs(g, id, forced);
    } else {
      force_must_save(g, id, forced);
    }
  }
}

void force_save_effectful_ops(Graph& g, const TorchBehavior& torch, std::vector<NodeId>& forced) {
  // torch recurses through getitem users depth-first, visiting a user's own
  // getitems before marking the user; an explicit stack keeps that order.
  struct Frame {
    NodeId node;
    uint32_t next_user;
  };
  std::vector<Frame> stack;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    // is_with_effects: the with_effects HOP, or a node the adapter flagged
    // (an invoke_subgraph whose body has effects).
    const bool with_effects =
        target_is(g, id, "higher_order.with_effects") || n.has(kFlagWithEffects);
    if (!with_effects || n.kind != NodeKind::kCallFunction || n.tag == PartitionerTag::kIsBackward) {
      continue;
    }
    if (torch.effectful_recompute_policy) {
      // 2.15: a forward effect cannot be recomputed (the backward's token
      // chain is fixed before partitioning), so MUST_RECOMPUTE is an error
      // and PREFER_RECOMPUTE no longer exempts the op from saving.
      if (n.recompute == RecomputePolicy::kMustRecompute) {
        throw Error(ErrorCode::kInvalidGraph, std::string(kEffectfulMustRecompute));
      }
    } else if (must_recompute(n)) {
      continue;  // up to 2.14: either recompute policy skips the op
    }
    stack.push_back({id, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      std::span<const NodeId> users = g.users(f.node);
      if (f.next_user > 0) {
        // Returning from the user visited last: mark it when its value is
        // not a sequence.
        const NodeId done = users[f.next_user - 1];
        if (target_is(g, done, "operator.getitem") &&
            g.node(done).value != ValueKind::kSequence) {
          force_must_save(g, done, forced);
        }
      }
      // Advance to the next getitem user.
      while (f.next_user < users.size() && !target_is(g, users[f.next_user], "operator.getitem")) {
        ++f.next_user;
      }
      if (f.next_user == users.size()) {
        stack.pop_back();
        continue;
      }
      const NodeId user = users[f.next_user++];
      stack.push_back({user, 0});
    }
  }
}

void force_save_bw_mutation_src(Graph& g, std::vector<NodeId>& forced) {
  // aot_autograd emits the copy_ epilogue last: walk back from the output
  // over copy_ nodes only.
  std::vector<uint8_t> mutated_in_bw(g.size(), 0);
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;) {
    const Node& n = g.node(id);
    if (n.kind == NodeKind::kOutput) continue;
    if (!target_is(g, id, "aten.copy_.default")) break;
    const NodeId dst = node_arg(g, id, 0);
    if (n.tag == PartitionerTag::kMustBeInBackward && dst != kNoNode) mutated_in_bw[dst] = 1;
    if (n.tag == PartitionerTag::kMustBeInForward && dst != kNoNode && mutated_in_bw[dst]) {
      const NodeId src = node_arg(g, id, 1);
      if (src != kNoNode) force_must_save(g, src, forced);
    }
  }
}

}  // namespace remat
