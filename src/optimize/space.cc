// optimize/space.cc — PlanSpace. Contract: optimize/space.h.
//
// Rows are built from intervals: each value contributes its bytes to a
// contiguous range of forward rows and a contiguous range of backward rows,
// either always (a constant) or only when saved. Constants go through
// difference arrays; saved ranges are listed per row (the MILP's rows) and
// evaluated by difference arrays too (model_peak is linear in the graph).
#include "optimize/space.h"

#include <algorithm>
#include <set>
#include <utility>

#include "analyze/analyze.h"
#include "decide/ban_rules.h"
#include "graph/impure.h"
#include "graph/query.h"
#include "graph/random_op.h"
#include "memory/bytes.h"
#include "memory/fusion.h"
#include "memory/plan.h"

namespace remat::optimize {
namespace {

// Whether storage `sid` of node n is shared with one of n's inputs.
bool aliases_input(const Graph& g, NodeId n, int64_t sid) {
  for (NodeId in : g.inputs(n))
    for (const TensorMeta& t : g.tensors(in))
      if (t.storage == sid) return true;
  return false;
}

// The node that allocates n's storages: a multi-output op's outputs exist
// from the op on, not from the getitems that take them out (their bytes
// are attributed to the getitems: fresh_bytes).
NodeId made_at(const Graph& g, NodeId n) {
  if (!is_getitem(g, n)) return n;
  const auto inputs = g.inputs(n);
  return inputs.empty() ? n : inputs[0];
}

// The bytes node n allocates, as the model counts them (space.h): fresh
// storages with an identity, each once; a multi-output op's go to its
// getitems (`claimed` remembers (op, storage) pairs already counted).
int64_t fresh_bytes(const Graph& g, NodeId n, std::set<std::pair<NodeId, int64_t>>& claimed) {
  const Node& node = g.node(n);
  if (node.kind != NodeKind::kCallFunction) return 0;
  if (is_getitem(g, n)) {
    const auto inputs = g.inputs(n);
    if (inputs.empty()) return 0;
    const NodeId op = inputs[0];
    int64_t total = 0;
    for (const TensorMeta& t : g.tensors(n)) {
      if (t.storage < 0 || aliases_input(g, op, t.storage)) continue;
      bool from_op = false;
      for (const TensorMeta& o : g.tensors(op)) from_op = from_op || o.storage == t.storage;
      if (from_op && claimed.insert({op, t.storage}).second) total += memory::allocation_bytes(g, t);
    }
    return total;
  }
  if (node.value != ValueKind::kTensor) return 0;  // tuples: counted at their getitems
  const OpInfo* op = g.op(n);
  if (op == nullptr || op->is_view || op->is_mutable) return 0;
  const auto tensors = g.tensors(n);
  int64_t total = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const int64_t sid = tensors[k].storage;
    if (sid < 0 || aliases_input(g, n, sid)) continue;
    bool repeat = false;
    for (size_t j = 0; j < k; ++j) repeat = repeat || tensors[j].storage == sid;
    if (!repeat) total += memory::allocation_bytes(g, tensors[k]);
  }
  return total;
}

// Everything a placeholder holds (inputs and tangents are whole storages).
int64_t held_bytes(const Graph& g, NodeId n) {
  const auto tensors = g.tensors(n);
  int64_t total = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    bool repeat = false;
    for (size_t j = 0; j < k; ++j)
      repeat = repeat || (tensors[j].storage >= 0 && tensors[j].storage == tensors[k].storage);
    if (!repeat) total += memory::allocation_bytes(g, tensors[k]);
  }
  return total;
}

bool saveable_value(const Graph& g, NodeId n, const PartitionOptions& opt) {
  const Node& node = g.node(n);
  if (is_sym_node(g, n)) return node.value != ValueKind::kSymFloat && node.value != ValueKind::kSymBool;
  const bool non_tensor = (node.value == ValueKind::kMissing && !node.has(kFlagTensorMeta)) ||
                          (node.value != ValueKind::kMissing && node.value != ValueKind::kTensor);
  if (non_tensor)
    return node.value == ValueKind::kBackwardState || node.value == ValueKind::kScriptObject ||
           is_opaque_node(g, n, opt.torch);
  return node.value != ValueKind::kMissing;
}

// Ops whose second run is not the first's: they are saved, never recomputed.
bool recomputable(const DecideContext& ctx, NodeId n) {
  const Graph& g = ctx.graph;
  const Node& node = g.node(n);
  if (node.kind == NodeKind::kGetAttr) return true;
  if (node.kind != NodeKind::kCallFunction) return false;
  if (node.recompute == RecomputePolicy::kMustSave) return false;
  if (node.has(kFlagImpure) || node.has(kFlagWithEffects)) return false;
  if (is_rng_op(g, n, ctx.options.torch)) return false;
  if (is_collective(g, n) || is_control_deps(g, n)) return false;
  const OpInfo* op = g.op(n);
  if (op == nullptr) return true;  // a Python callable (getitem, sym arithmetic)
  if (op->is_mutable || op->kind == OpKind::kHigherOrder) return false;
  const uint8_t cat = node.op < ctx.op_categories.size() ? ctx.op_categories[node.op] : 0;
  return (cat & kCatRandom) == 0;
}

// Per node: the node whose storage it holds — itself, or, for a value
// sharing a storage with an input of its node (a view, an in-place op),
// that input's root. A getitem of a multi-output op is its own root (the
// model gives it the storage it takes out), unless it takes out a view of
// an input of the op (split, unbind): then that input's root. Where no
// storage id says so (a graph without them, or a view given a storage of
// its own), a view, or a mutable op with one result, holds its first
// argument's storage: the simulator's rule (memory/simulate.cc, aliased),
// and fresh_bytes gives such ops no bytes of their own.
std::vector<NodeId> storage_roots(const Graph& g) {
  std::vector<NodeId> root(g.size());
  for (NodeId n = 0; n < g.size(); ++n) {
    root[n] = n;
    if (g.node(n).kind != NodeKind::kCallFunction) continue;
    const auto tensors = g.tensors(n);
    if (tensors.size() != 1) continue;
    // A getitem of a multi-output view op (split, unbind) takes out a view
    // of an input of the op: its root is that input's.
    if (tensors[0].storage >= 0)
      for (NodeId in : g.inputs(made_at(g, n)))
        for (const TensorMeta& t : g.tensors(in))
          if (t.storage == tensors[0].storage && root[n] == n) root[n] = root[in];
    if (root[n] != n || is_getitem(g, n)) continue;
    const OpInfo* op = g.op(n);
    if (op == nullptr || op->kind != OpKind::kOverload) continue;
    if (!op->is_view && !(op->is_mutable && op->num_returns == 1)) continue;
    const NodeId first = node_arg(g, n, 0);
    if (first != kNoNode && !g.tensors(first).empty()) root[n] = root[first];
  }
  return root;
}

// Index of the first position in `sorted` that is >= p.
uint32_t first_at_or_after(const std::vector<NodeId>& sorted, NodeId p) {
  return static_cast<uint32_t>(std::lower_bound(sorted.begin(), sorted.end(), p) - sorted.begin());
}
// Index past the last position in `sorted` that is <= p.
uint32_t past_at_or_before(const std::vector<NodeId>& sorted, NodeId p) {
  return static_cast<uint32_t>(std::upper_bound(sorted.begin(), sorted.end(), p) - sorted.begin());
}

}  // namespace

PlanSpace::PlanSpace(const DecideContext& ctx, int num_fwd_outputs, bool joint_order_backward,
                     bool model_rows)
    : g_(ctx.graph), num_fwd_outputs_(num_fwd_outputs), model_rows_(model_rows) {
  make_vars(ctx);
  make_rows(ctx, num_fwd_outputs, joint_order_backward && model_rows);
  row_of_.assign(g_.size(), -1);
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].node != kNoNode) row_of_[rows_[i].node] = static_cast<int>(i);
  for (NodeId p = 0; p < g_.size(); ++p) {
    const NodeId j = g_.node(p).origin;
    if (j == kNoNode || j == kCreatedNode) continue;
    if (j >= prepared_of_joint_.size()) prepared_of_joint_.resize(j + 1, kNoNode);
    prepared_of_joint_[j] = p;
  }
}

std::vector<int64_t> PlanSpace::simulated_rows(const PartitionResult& r) const {
  std::vector<int64_t> out(rows_.size(), 0);
  auto take = [&](const Graph& g, const std::vector<int64_t>& timeline, MemoryRow::Pass pass) {
    int64_t pending = 0;
    for (NodeId n = 0; n < g.size() && n < timeline.size(); ++n) {
      pending = std::max(pending, timeline[n]);
      const NodeId p = prepared_of(g.node(n).origin);
      if (p == kNoNode || row_of_[p] < 0 || rows_[static_cast<size_t>(row_of_[p])].pass != pass) continue;
      int64_t& slot = out[static_cast<size_t>(row_of_[p])];
      slot = std::max(slot, pending);
      pending = 0;
    }
    return pending;
  };
  const int64_t forward_tail = take(r.forward, r.memory.forward_timeline, MemoryRow::Pass::kForward);
  out[between_] = std::max(r.memory.between_bytes, forward_tail);
  take(r.backward, r.memory.backward_timeline, MemoryRow::Pass::kBackward);
  return out;
}

void PlanSpace::make_vars(const DecideContext& ctx) {
  const Graph& g = g_;
  const NodeInfo& info = ctx.info;
  const PartitionOptions& opt = ctx.options;
  const std::vector<uint8_t> bw_only = backward_only(g, info);
  std::set<std::pair<NodeId, int64_t>> claimed;
  var_of_.assign(g.size(), -1);
  std::vector<uint8_t> bw_output(g.size(), 0);
  for (NodeId o : split_outputs(g, num_fwd_outputs_).bwd)
    if (o != kNoNode) bw_output[o] = 1;
  for (NodeId n = 0; n < g.size(); ++n) {
    const Node& node = g.node(n);
    if (bw_only[n] || node.kind == NodeKind::kOutput) continue;
    Var v;
    v.node = n;
    v.can_save = saveable_value(g, n, opt) && !must_recompute(node) &&
                 !(opt.recompute_views && g.op(n) != nullptr && g.op(n)->is_view) &&
                 !(opt.torch.epilogue_mutation_unsaveable && node.has(kFlagEpilogueMutation));
    v.can_recompute = recomputable(ctx, n);
    // The backward reads it, or returns it (a gradient that is a forward
    // value). Not torch's required_bw: that also marks values the
    // extraction never hands over.
    v.needed = bw_output[n] != 0;
    for (NodeId user : g.users(n))
      v.needed = v.needed || (bw_only[user] && g.node(user).kind != NodeKind::kOutput);
    // measure_plan counts a node the backward computes only when the
    // forward computes it too: a node no forward output needs is priced 0
    // (a lower bound: saving a value it feeds makes the forward compute it).
    v.cost = node.kind == NodeKind::kCallFunction && info.required_fw[n] ? recompute_cost(g, n, opt) : 0;
    v.bytes = fresh_bytes(g, n, claimed);
    var_of_[n] = static_cast<int>(vars_.size());
    vars_.push_back(v);
  }
  deps_.resize(vars_.size());
  users_.resize(vars_.size());
  for (size_t k = 0; k < vars_.size(); ++k)
    for (NodeId in : g.inputs(vars_[k].node)) {
      const int u = var_of_[in];
      if (u >= 0 && std::find(deps_[k].begin(), deps_[k].end(), static_cast<uint32_t>(u)) == deps_[k].end()) {
        deps_[k].push_back(static_cast<uint32_t>(u));
        users_[static_cast<size_t>(u)].push_back(static_cast<uint32_t>(k));
      }
    }
}

void PlanSpace::make_rows(const DecideContext& ctx, int num_fwd_outputs, bool backward_rows) {
  const Graph& g = g_;
  const NodeInfo& info = ctx.info;
  const std::vector<uint8_t> bw_only = backward_only(g, info);
  // The instants: forward rows after each required forward call_function,
  // the return, backward rows after each backward call_function.
  std::vector<NodeId> fw_pos, bw_pos;
  for (NodeId n = 0; n < g.size(); ++n) {
    if (g.node(n).kind != NodeKind::kCallFunction) continue;
    if (info.required_fw[n] && !bw_only[n]) fw_pos.push_back(n);
    else if (info.tangents_closure[n] && backward_rows) bw_pos.push_back(n);
  }
  const uint32_t F = static_cast<uint32_t>(fw_pos.size()), B = static_cast<uint32_t>(bw_pos.size());
  const uint32_t between = F, bw0 = F + 1;
  between_ = between;
  rows_.assign(F + 1 + B, MemoryRow{});
  for (uint32_t i = 0; i < F; ++i) {
    rows_[i].node = fw_pos[i];
    rows_[i].pass = MemoryRow::Pass::kForward;
  }
  rows_[between].pass = MemoryRow::Pass::kBetween;
  for (uint32_t i = 0; i < B; ++i) {
    rows_[bw0 + i].node = bw_pos[i];
    rows_[bw0 + i].pass = MemoryRow::Pass::kBackward;
  }
  for (Var& v : vars_) {
    v.saved_from = between;  // at least the return
    v.saved_to = v.read_to = bw0;  // no backward row
  }
  if (!model_rows_) return;

  std::vector<int64_t> diff(rows_.size() + 1, 0), born(rows_.size(), 0);
  // Rows [from, to); `allocated`: the storage is made at row `from`'s node
  // (not yet alive just before it), rather than held since before.
  auto add_const = [&](uint32_t from, uint32_t to, int64_t bytes, bool allocated = true) {
    if (from >= to || bytes == 0) return;
    diff[from] += bytes;
    diff[to] -= bytes;
    if (allocated) born[from] += bytes;
  };
  // What lives all step: the inputs, and the caller's outputs from their node on.
  int64_t inputs = 0;
  for (NodeId n : info.inputs) inputs += held_bytes(g, n);
  add_const(0, static_cast<uint32_t>(rows_.size()), inputs);
  // Storage lives: a view or alias keeps its root's storage alive, so each
  // root's life spans the uses of all its aliases (and the end of the step
  // when an alias is returned).
  const std::vector<NodeId> root = storage_roots(g);
  // Under inductor's model, what a pass's kernels inline has a buffer
  // there in no plan that does not save it (space.h).
  const bool inductor = ctx.options.memory_model == MemoryModel::kInductor;
  std::vector<uint8_t> inlined_fw(g.size(), 0), inlined_bw(g.size(), 0);
  std::vector<int64_t> counted(g.size(), 0);  // a node's bytes in the row after it
  if (inductor) {
    inlined_fw = memory::inductor_inlined(g, [&](NodeId u) { return info.required_fw[u] && !bw_only[u]; });
    inlined_bw = memory::inductor_inlined(g, [&](NodeId u) { return info.tangents_closure[u] != 0; });
    for (Var& v : vars_) {
      v.inlined_fw = inlined_fw[v.node] != 0;
      v.inlined_bw = inlined_bw[v.node] != 0;
    }
  }
  // A saved alias (a view) keeps its root's storage.
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    const NodeId n = vars_[k].node;
    const int r = var_of_[root[n]];
    if (root[n] != n && r >= 0 && vars_[k].can_save) vars_[static_cast<size_t>(r)].aliases.push_back(k);
  }
  std::vector<NodeId> fw_last(g.size()), bw_first(g.size(), kNoNode), bw_last(g.size(), kNoNode),
      last_use(g.size());
  std::vector<uint8_t> pinned(g.size(), 0);
  for (NodeId n = 0; n < g.size(); ++n) fw_last[n] = last_use[n] = n;
  // Under inductor, what a tangent-derived node inlined into later kernels
  // reads lives until the last of them runs (in every plan: nothing saves
  // a tangent-derived node).
  std::vector<NodeId> reads_at(g.size());
  for (NodeId n = static_cast<NodeId>(g.size()); n-- > 0;) {
    reads_at[n] = n;
    if (!inductor || !info.tangents_closure[n] || !inlined_bw[n]) continue;
    for (NodeId w : g.users(n))
      if (info.tangents_closure[w]) reads_at[n] = std::max(reads_at[n], reads_at[w]);
  }
  for (NodeId x = 0; x < g.size(); ++x) {
    const NodeId r = root[x];
    for (NodeId user : g.users(x)) {
      last_use[r] = std::max(last_use[r], reads_at[user]);
      if (info.tangents_closure[user]) {
        bw_first[r] = std::min(bw_first[r], user);
        bw_last[r] = bw_last[r] == kNoNode ? reads_at[user] : std::max(bw_last[r], reads_at[user]);
      } else if (info.required_fw[user]) {
        fw_last[r] = std::max(fw_last[r], user);
      }
    }
  }
  const OutputLeaves leaves = split_outputs(g, num_fwd_outputs);
  for (const auto* outs : {&leaves.fwd, &leaves.bwd})
    for (NodeId o : *outs)
      if (o != kNoNode) pinned[root[o]] = 1;  // the caller's outputs, gradients: to the end

  // Per var, whatever its bytes: whether the forward needs it, and if not,
  // where it would compute it (a saved view of such a var makes it compute it).
  for (Var& v : vars_) {
    v.optional_fw = !info.required_fw[v.node];
    if (v.optional_fw) v.saved_from = first_at_or_after(fw_pos, v.node);
  }
  // Per var, whatever its bytes: the row of its first tangent-derived
  // reader (chained_peak's chains run through views and aliases too).
  read_row_.assign(vars_.size(), Var::kNoRow);
  for (size_t k = 0; k < vars_.size() && B > 0; ++k) {
    NodeId first = kNoNode;
    for (NodeId user : g.users(vars_[k].node))
      if (info.tangents_closure[user]) first = std::min(first, user);
    if (first != kNoNode) read_row_[k] = bw0 + first_at_or_after(bw_pos, first);
    if (vars_[k].node > bw_pos[0]) vars_[k].placed_row = bw0 + first_at_or_after(bw_pos, vars_[k].node);
  }
  // Per node, the row of its own storage's first tangent-derived reader
  // (early_uses visits each node many times).
  std::vector<uint32_t> own_read_row(g.size(), Var::kNoRow);
  for (NodeId n = 0; n < g.size() && B > 0; ++n)
    if (root[n] == n && bw_first[n] != kNoNode) own_read_row[n] = bw0 + first_at_or_after(bw_pos, bw_first[n]);
  for (size_t k = 0; k < vars_.size(); ++k) {
    Var& v = vars_[k];
    const NodeId n = v.node;
    const int64_t b = v.bytes;
    if (b == 0) continue;
    // Its bytes in every plan, per pass.
    const int64_t unsaved_fw = v.inlined_fw ? 0 : b, unsaved_bw = v.inlined_bw ? 0 : b;
    counted[n] = pinned[n] ? b : unsaved_fw;
    if (pinned[n]) {  // a caller's output: alive from its node to the end of the step
      add_const(info.required_fw[n] ? first_at_or_after(fw_pos, n) : between,
                static_cast<uint32_t>(rows_.size()), b);
      v.bytes = 0;  // saving it adds nothing
      continue;
    }
    // Forward rows where it is alive only because it is saved, through the
    // return (row F).
    if (info.required_fw[n]) {
      add_const(first_at_or_after(fw_pos, made_at(g, n)), past_at_or_before(fw_pos, fw_last[n]), unsaved_fw);
      v.saved_from = past_at_or_before(fw_pos, fw_last[n]);
    } else {
      v.saved_from = first_at_or_after(fw_pos, n);
    }
    if (B == 0) continue;
    if (bw_first[n] == kNoNode) continue;
    const uint32_t first = first_at_or_after(bw_pos, bw_first[n]),
                   last = past_at_or_before(bw_pos, bw_last[n]);
    add_const(bw0 + first, bw0 + last, unsaved_bw);  // read by the backward: alive in either plan
    v.saved_to = bw0 + first;  // and before its first reader only when saved
    v.first_row = bw0 + first;
    v.read_to = unsaved_bw > 0 ? std::max(v.saved_to, bw0 + last) : v.saved_to;
    // A chain of users recomputed for a reader before `first` needs it
    // earlier, in either plan: it is computed (or saved) before the chain
    // runs and lives on to its own readers.
    if (!v.inlined_bw) early_uses(k, v.saved_to, own_read_row);
  }
  // Backward values and tangents: alive from their node to their last use.
  if (B > 0) {
    std::set<std::pair<NodeId, int64_t>> claimed;
    for (NodeId n = 0; n < g.size(); ++n) {
      if (!info.tangents_closure[n]) continue;
      const Node& node = g.node(n);
      int64_t b = 0;
      if (node.kind == NodeKind::kPlaceholder) b = is_tangent(g, n) ? held_bytes(g, n) : 0;
      else b = inlined_bw[n] ? 0 : fresh_bytes(g, n, claimed);
      if (b == 0) continue;
      counted[n] = b;
      const uint32_t from = node.kind == NodeKind::kPlaceholder ? 0 : first_at_or_after(bw_pos, made_at(g, n));
      const uint32_t to = pinned[n] ? B : past_at_or_before(bw_pos, last_use[n]);
      add_const(bw0 + from, bw0 + to, b, node.kind != NodeKind::kPlaceholder);
    }
  }
  int64_t running = 0;
  for (size_t r = 0; r < rows_.size(); ++r) {
    running += diff[r];
    rows_[r].constant = running;
    if (r >= bw0) rows_[r].before = running - born[r];
  }
  if (inductor) {
    const std::vector<uint8_t> reduced = allow_in_place(root, pinned, fw_last, last_use, counted);
    read_through_inlined(root, bw_first, bw_pos, bw0, reduced);
  }
}

// Under inductor (space.h): a var no tangent-derived node reads itself,
// read by a chain of vars the joint graph's kernels inline (each one's
// readers all inline it, so any backward that recomputes them does), is
// read by the kernel of the tangent-derived node that reads the chain's
// last var: alive at that row when the chain is recomputed. Chains of at
// most kEarlyDepth vars; per var and row, the shortest. It dies there, so
// the row's node may write its result into it: where allow_in_place has
// not already left the node's bytes out, a var of the result's size is
// not counted.
void PlanSpace::read_through_inlined(const std::vector<NodeId>& root, const std::vector<NodeId>& bw_first,
                                     const std::vector<NodeId>& bw_pos, uint32_t bw0,
                                     const std::vector<uint8_t>& reduced) {
  const Graph& g = g_;
  auto may_take = [&](uint32_t row, int64_t bytes) {
    const NodeId node = rows_[row].node;
    return !reduced[row] && memory::inductor_may_write_in_place(g, node) &&
           memory::allocation_bytes(g, g.tensors(node)[0]) == bytes;
  };
  const std::vector<uint8_t> fused = memory::inductor_inlined(g, [](NodeId) { return true; });
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    const Var& v = vars_[k];
    const NodeId n = v.node;
    if (v.bytes == 0 || root[n] != n || bw_first[n] != kNoNode || fused[n]) continue;
    std::vector<std::pair<uint32_t, std::vector<uint32_t>>> found;  // (row, path)
    std::vector<uint32_t> path;
    auto walk = [&](auto&& self, NodeId from) -> void {
      if (path.size() == static_cast<size_t>(kEarlyDepth)) return;
      for (NodeId user : g.users(from)) {
        const int w = var_of_[user];
        if (w < 0 || !fused[user]) continue;
        path.push_back(static_cast<uint32_t>(w));
        if (bw_first[user] != kNoNode) found.emplace_back(bw0 + first_at_or_after(bw_pos, bw_first[user]), path);
        self(self, user);
        path.pop_back();
      }
    };
    walk(walk, n);
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.size() < b.second.size();
    });
    for (size_t i = 0; i < found.size(); ++i)
      if ((i == 0 || found[i].first != found[i - 1].first) && !may_take(found[i].first, v.bytes))
        rows_[found[i].first].chained.push_back({std::move(found[i].second), v.bytes, k});
  }
}

// inductor's inplace_buffers (space.h): the row after a node that may
// write its result into an input whose last read it is leaves out the
// node's bytes; a forward row whose one such input is a var counts them
// again when that var is saved (then it does not die there). Tangents die
// too; the step's inputs and constants never do. Returns the rows reduced.
std::vector<uint8_t> PlanSpace::allow_in_place(const std::vector<NodeId>& root, const std::vector<uint8_t>& pinned,
                                               const std::vector<NodeId>& fw_last,
                                               const std::vector<NodeId>& last_use,
                                               const std::vector<int64_t>& counted) {
  const Graph& g = g_;
  std::vector<uint8_t> reduced(rows_.size(), 0);
  for (size_t r = 0; r < rows_.size(); ++r) {
    MemoryRow& row = rows_[r];
    if (row.pass == MemoryRow::Pass::kBetween || counted[row.node] == 0 ||
        !memory::inductor_may_write_in_place(g, row.node))
      continue;
    const bool forward = row.pass == MemoryRow::Pass::kForward;
    const auto out = g.tensors(row.node);
    const int64_t bytes = memory::allocation_bytes(g, out[0]);
    std::vector<NodeId> dying;
    for (NodeId in : g.inputs(row.node)) {
      const NodeId base = root[in];
      const auto ts = g.tensors(in);
      const NodeKind kind = g.node(base).kind;
      if (ts.size() != 1 || memory::allocation_bytes(g, ts[0]) != bytes || pinned[base] ||
          (kind == NodeKind::kPlaceholder && !is_tangent(g, base)) || kind == NodeKind::kGetAttr)
        continue;
      if ((forward ? fw_last[base] : last_use[base]) != row.node) continue;
      if (std::find(dying.begin(), dying.end(), base) == dying.end()) dying.push_back(base);
    }
    if (dying.empty()) continue;
    row.constant -= counted[row.node];
    reduced[r] = 1;
    if (forward && dying.size() == 1 && var_of_[dying[0]] >= 0)
      row.extra.push_back({static_cast<uint32_t>(var_of_[dying[0]]), counted[row.node], -1});
  }
  return reduced;
}

// Depth-first over chains of forward users (at most kEarlyDepth long) from
// var k; a chain ending at a node whose own storage the backward reads
// before `saved_to` is an early use, by its first reader's row.
void PlanSpace::early_uses(size_t k, uint32_t saved_to, const std::vector<uint32_t>& own_read_row) {
  Var& v = vars_[k];
  std::vector<uint32_t> path;
  // v.early stays sorted by (row, length), ties in the order found, and at
  // most kEarlyUses long as chains are found: a deep fan-out finds many, and
  // copying each path cost more than the walk.
  auto keep = [&](uint32_t row) {
    auto at = std::upper_bound(v.early.begin(), v.early.end(), row, [&](uint32_t r, const EarlyUse& e) {
      return r != e.row ? r < e.row : path.size() < e.path.size();
    });
    if (at == v.early.end() && v.early.size() == static_cast<size_t>(kEarlyUses)) return;
    v.early.insert(at, EarlyUse{row, path});
    if (v.early.size() > static_cast<size_t>(kEarlyUses)) v.early.pop_back();
  };
  auto walk = [&](auto&& self, NodeId from) -> void {
    if (path.size() == static_cast<size_t>(kEarlyDepth)) return;
    for (NodeId user : g_.users(from)) {
      const int w = var_of_[user];
      if (w < 0 || std::find(path.begin(), path.end(), static_cast<uint32_t>(w)) != path.end()) continue;
      path.push_back(static_cast<uint32_t>(w));
      if (own_read_row[user] < saved_to) keep(own_read_row[user]);
      self(self, user);
      path.pop_back();
    }
  };
  walk(walk, v.node);
  // A getitem's storage is allocated by its multi-output op: recomputing the
  // op for a sibling's reader allocates it too.
  if (is_getitem(g_, v.node) && !g_.inputs(v.node).empty()) {
    const int op = var_of_[g_.inputs(v.node)[0]];
    if (op >= 0) {
      path.push_back(static_cast<uint32_t>(op));
      walk(walk, g_.inputs(v.node)[0]);
      path.pop_back();
    }
  }
}

std::optional<Assignment> PlanSpace::implied_recompute(std::span<const uint8_t> saved) const {
  Assignment a;
  a.saved.assign(saved.begin(), saved.end());
  a.recomputed.assign(vars_.size(), 0);
  std::vector<uint32_t> stack;
  auto need = [&](uint32_t k) -> bool {
    if (a.saved[k] || a.recomputed[k]) return true;
    if (!vars_[k].can_recompute) return false;
    a.recomputed[k] = 1;
    a.cost += vars_[k].cost;
    stack.push_back(k);
    return true;
  };
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    if (a.saved[k] && !vars_[k].can_save) return std::nullopt;
    if (vars_[k].needed && !need(k)) return std::nullopt;
    while (!stack.empty()) {
      const uint32_t r = stack.back();
      stack.pop_back();
      for (uint32_t u : deps_[r])
        if (!need(u)) return std::nullopt;
    }
  }
  // A saved value nothing reads is not handed over: the extraction prunes
  // it, so the plan does not save it. (users_ is deps_ reversed.)
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    if (!a.saved[k] || vars_[k].needed) continue;
    bool read = false;
    for (uint32_t u : users_[k]) read = read || a.recomputed[u];
    a.saved[k] = read;
  }
  return a;
}

std::vector<int64_t> PlanSpace::row_values(std::span<const uint8_t> saved,
                                           std::span<const uint8_t> recomputed) const {
  return values(saved, recomputed, /*before=*/false);
}

std::vector<int64_t> PlanSpace::values(std::span<const uint8_t> saved,
                                       std::span<const uint8_t> recomputed, bool before) const {
  return values(saved, recomputed, before, /*all_chains=*/false);
}

int64_t PlanSpace::chained_peak(std::span<const uint8_t> saved) const {
  const std::vector<int64_t> v = chained_rows(saved);
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::vector<int64_t> PlanSpace::chained_rows(std::span<const uint8_t> saved) const {
  if (!model_rows_) return {};
  const std::optional<Assignment> a = implied_recompute(saved);
  if (!a) return {};
  // The rows after each node only: the chains are what this bound adds,
  // and a screen run per candidate plan should cost one pass.
  return values(a->saved, a->recomputed, /*before=*/false, /*all_chains=*/true);
}

uint32_t PlanSpace::made_by_row(uint32_t k, std::span<const uint8_t> recomputed,
                                std::span<const uint32_t> made_by, bool all_chains) const {
  uint32_t t = std::min(all_chains ? read_row_[k] : vars_[k].first_row, vars_[k].placed_row);
  for (uint32_t u : users_[k])
    if (recomputed[u]) t = std::min(t, made_by[u]);
  return t;
}

std::vector<uint32_t> PlanSpace::made_by(std::span<const uint8_t> recomputed, bool all_chains) const {
  std::vector<uint32_t> out(vars_.size(), Var::kNoRow);
  if (recomputed.empty()) return out;
  // Users come after what they read (vars are in graph order), so each
  // user's row is final when its inputs' are computed.
  for (size_t k = vars_.size(); k-- > 0;)
    if (recomputed[k]) out[k] = made_by_row(static_cast<uint32_t>(k), recomputed, out, all_chains);
  return out;
}

VarSpans PlanSpace::var_spans(uint32_t k, std::span<const uint8_t> saved, std::span<const uint8_t> recomputed,
                              std::span<const uint32_t> made_by, bool all_chains) const {
  VarSpans out;
  const Var& v = vars_[k];
  if (v.bytes == 0) return out;
  const uint32_t bw0 = between_ + 1;
  auto add = [&](uint32_t from, uint32_t to, bool before_only = false) {
    if (from < to) out.spans[out.count++] = {from, to, before_only};
  };
  const bool kept = holds_storage(saved, k);
  // Just before its first reader's node, a var that reader reads is alive
  // in either plan (saved, or recomputed in the batch before it).
  if (v.first_row != Var::kNoRow && (kept || (!v.inlined_bw && !recomputed.empty() && recomputed[k])))
    add(v.first_row, v.first_row + 1, /*before_only=*/true);
  if (kept) {
    add(v.saved_from, bw0);  // forward rows through the return
    // Backward rows before its first reader, or before the batch that
    // recomputes a user of what holds the storage (the var itself or a
    // saved view of it, or a view recomputed from it: a residual add
    // reading a saved view of a matmul keeps the matmul's storage until
    // the add is made): a saved value lives from the backward's start to
    // its last use. Only saved holders count: a user of a recomputed
    // holder reads the fresh copy.
    uint32_t until = v.saved_to;
    auto read_late = [&](uint32_t holder) {
      if (!saved[holder]) return;
      for (uint32_t u : users_[holder])
        if (recomputed[u] && made_by[u] != Var::kNoRow) until = std::max(until, made_by[u]);
    };
    if (!recomputed.empty()) {
      read_late(k);
      for (uint32_t a : v.aliases) read_late(a);
      // A view recomputed from the saved var (split's getitems) is a view
      // of the saved storage: its recomputed users keep it alive too.
      if (saved[k])
        for (uint32_t a : v.aliases)
          if (recomputed[a])
            for (uint32_t u : users_[a])
              if (recomputed[u] && made_by[u] != Var::kNoRow) until = std::max(until, made_by[u]);
    }
    add(bw0, v.saved_to);
    out.extended = {std::max(v.saved_to, v.read_to), until};
    add(out.extended.first, until);
    return out;
  }
  {  // Not held: read by a saved var the forward computes only to save it, later.
    uint32_t fw_until = v.saved_from;
    auto read_in_forward = [&](uint32_t holder) {
      for (uint32_t u : users_[holder])
        if (saved[u] && vars_[u].optional_fw) fw_until = std::max(fw_until, vars_[u].saved_from);
    };
    read_in_forward(k);
    for (uint32_t a : v.aliases) read_in_forward(a);
    add(v.saved_from, std::min(fw_until, between_));
  }
  // Needed early by a chain of recomputed users read before it: any
  // such chain (all_chains; inductor inlines an inlined_bw var wherever
  // it runs, so it has no chains), else the early ones listed.
  if (all_chains) {
    if (v.inlined_bw || recomputed.empty() || !recomputed[k] || made_by[k] == Var::kNoRow) return out;
    // Alive until its first reader (the constant counts it from there);
    // one the backward reads only through recomputed users (a transposed
    // activation for a weight's gradient, the next layer's input): until
    // the batch that makes the last of them, since the constant counts
    // none of its bytes. Users of a recomputed view of it read its storage
    // too (an MoE expert's gate matmul, viewed, then read by the SiLU and
    // by its gradient's factors, made for later backward nodes: 128 KiB
    // under every build of moe_1923's plans at its 7.6 MiB limit).
    uint32_t until = v.saved_to;
    auto read_late = [&](uint32_t holder) {
      for (uint32_t u : users_[holder])
        if (recomputed[u] && made_by[u] != Var::kNoRow) until = std::max(until, made_by[u]);
    };
    if (v.first_row == Var::kNoRow) {
      read_late(k);
      for (uint32_t a : v.aliases)
        if (recomputed[a]) read_late(a);
    }
    out.extended = {made_by[k], until};
    add(made_by[k], until);
    return out;
  }
  for (const EarlyUse& e : v.early) {
    if (chain_recomputed(e.path, recomputed)) {
      add(e.row, v.saved_to);
      break;
    }
  }
  return out;
}

bool PlanSpace::chained_counts(const MemoryRow::Chained& c, uint32_t r, std::span<const uint8_t> recomputed,
                               std::pair<uint32_t, uint32_t> extended) {
  return chain_recomputed(c.path, recomputed) && !(extended.first <= r && r < extended.second);
}

std::vector<int64_t> PlanSpace::values(std::span<const uint8_t> saved, std::span<const uint8_t> recomputed,
                                       bool before, bool all_chains) const {
  std::vector<int64_t> diff(rows_.size() + 1, 0);
  // Per var, the backward rows [from, to) a recomputed user extends its life
  // over (past what its first reader's rows count): a row's chained term of
  // the same storage (inductor) is already counted there.
  std::vector<std::pair<uint32_t, uint32_t>> extended(vars_.size(), {0, 0});
  const std::vector<uint32_t> made = made_by(recomputed, all_chains);
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    const VarSpans s = var_spans(k, saved, recomputed, made, all_chains);
    for (int i = 0; i < s.count; ++i) {
      if (s.spans[i].before_only && !before) continue;
      diff[s.spans[i].from] += vars_[k].bytes;
      diff[s.spans[i].to] -= vars_[k].bytes;
    }
    extended[k] = s.extended;
  }
  std::vector<int64_t> out(rows_.size());
  int64_t running = 0;
  for (size_t r = 0; r < rows_.size(); ++r) {
    running += diff[r];
    out[r] = (before ? rows_[r].before : rows_[r].constant) + running;
    if (!before)
      for (const RowTerm& t : rows_[r].extra)
        if (holds_storage(saved, t.var)) out[r] += t.bytes;
    for (const MemoryRow::Chained& c : rows_[r].chained)
      if (chained_counts(c, static_cast<uint32_t>(r), recomputed, extended[c.var])) out[r] += c.bytes;
  }
  return out;
}

bool PlanSpace::chain_recomputed(std::span<const uint32_t> path, std::span<const uint8_t> recomputed) {
  if (recomputed.empty()) return false;
  for (uint32_t u : path)
    if (!recomputed[u]) return false;
  return true;
}

bool PlanSpace::holds_storage(std::span<const uint8_t> saved, uint32_t k) const {
  if (saved[k]) return true;
  for (uint32_t a : vars_[k].aliases)
    if (saved[a]) return true;
  return false;
}

std::vector<RowTerm> PlanSpace::row_terms(uint32_t r) const {
  std::vector<RowTerm> out;
  for (uint32_t k = 0; k < vars_.size(); ++k) {
    const Var& v = vars_[k];
    if (v.bytes == 0) continue;
    if (r <= between_) {
      if (r >= v.saved_from) out.push_back({k, v.bytes, -1});
      continue;
    }
    if (r >= v.saved_to) continue;
    int segment = -1;  // the last early use at or before r
    for (size_t j = 0; j < v.early.size() && v.early[j].row <= r; ++j) segment = static_cast<int>(j);
    out.push_back({k, v.bytes, segment});
  }
  out.insert(out.end(), rows_[r].extra.begin(), rows_[r].extra.end());
  return out;
}

int64_t PlanSpace::model_peak(std::span<const uint8_t> saved) const {
  std::optional<Assignment> a = implied_recompute(saved);
  int64_t peak = 0;
  for (bool before : {false, true}) {
    const std::vector<int64_t> rows =
        a ? values(a->saved, a->recomputed, before) : values(saved, {}, before);
    for (int64_t v : rows) peak = std::max(peak, v);
  }
  return peak;
}

std::vector<NodeId> PlanSpace::saved_nodes(std::span<const uint8_t> saved) const {
  std::vector<NodeId> out;
  for (size_t k = 0; k < vars_.size(); ++k)
    if (saved[k]) out.push_back(vars_[k].node);
  return out;
}

std::vector<uint8_t> PlanSpace::saved_flags(std::span<const NodeId> nodes) const {
  std::vector<uint8_t> out(vars_.size(), 0);
  for (NodeId n : nodes) {
    const int k = var_of(n);
    if (k >= 0) out[static_cast<size_t>(k)] = 1;
  }
  return out;
}

}  // namespace remat::optimize
