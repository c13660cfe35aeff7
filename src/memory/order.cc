// memory/order.cc — memory_ordered_backward: a greedy memory-aware order of
// the backward between barriers, kept only where the simulation says it
// lowers the peak.
//
// Contract: see memory/order.h. The greedy score is an estimate (a node's
// storages as one unit per root, views free, a multi-output op's results
// as one allocation); the simulation, run on both orders, decides.
#include "memory/order.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "analyze/analyze.h"
#include "decide/ban_rules.h"
#include "graph/copy.h"
#include "graph/query.h"
#include "graph/random_op.h"
#include "memory/bytes.h"
#include "remat/memory.h"

namespace remat {
namespace {

// Nodes whose place in the order is part of what they mean (order.h).
bool is_barrier(const Graph& g, NodeId n, const TorchBehavior& torch) {
  const Node& node = g.node(n);
  if (node.kind != NodeKind::kCallFunction) return false;
  if (node.has(kFlagImpure) || node.has(kFlagWithEffects)) return true;
  if (is_rng_op(g, n, torch) || is_collective(g, n) || is_collective_wait(g, n, torch) ||
      is_control_deps(g, n))
    return true;
  const OpInfo* op = g.op(n);
  return op != nullptr && (op->is_mutable || op->kind == OpKind::kHigherOrder);
}

// Per node, the node whose storage its value is: itself when it allocates,
// its input's root when it is a view, an in-place result or a getitem (the
// estimate counts a multi-output op's results as the op's one allocation).
std::vector<NodeId> roots(const Graph& g) {
  std::vector<NodeId> root(g.size());
  for (NodeId n = 0; n < g.size(); ++n) {
    root[n] = n;
    if (g.node(n).kind != NodeKind::kCallFunction) continue;
    const auto inputs = g.inputs(n);
    if (inputs.empty()) continue;
    if (is_getitem(g, n)) {
      root[n] = root[inputs[0]];
      continue;
    }
    const auto tensors = g.tensors(n);
    if (tensors.size() != 1) continue;
    const OpInfo* op = g.op(n);
    bool aliases = op != nullptr && op->kind == OpKind::kOverload && op->is_view;
    for (NodeId in : inputs)
      for (const TensorMeta& t : g.tensors(in))
        aliases = aliases || (tensors[0].storage >= 0 && t.storage == tensors[0].storage);
    if (aliases) root[n] = root[inputs[0]];
  }
  return root;
}

class Greedy {
 public:
  Greedy(const Graph& g, const TorchBehavior& torch) : g_(g), root_(roots(g)) {
    const size_t n = g.size();
    bytes_.assign(n, 0);
    readers_.assign(n, 0);
    missing_.assign(n, 0);
    barrier_.assign(n, 0);
    in_roots_.resize(n);
    users_.resize(n);
    for (NodeId id = 0; id < n; ++id) {
      barrier_[id] = is_barrier(g, id, torch);
      if (root_[id] == id)
        for (const TensorMeta& t : g.tensors(id)) bytes_[id] += memory::allocation_bytes(g, t);
      for (NodeId in : g.inputs(id)) in_roots_[id].push_back(root_[in]);
      distinct(in_roots_[id]);
      for (NodeId r : in_roots_[id]) ++readers_[r];
      std::vector<NodeId> inputs(g.inputs(id).begin(), g.inputs(id).end());
      missing_[id] = static_cast<uint32_t>(distinct(inputs).size());
      users_[id].assign(g.users(id).begin(), g.users(id).end());
      distinct(users_[id]);
    }
  }

  // The order: placeholders, then each segment between barriers scheduled
  // greedily, each barrier at its place, the output last.
  std::vector<NodeId> order() {
    const size_t n = g_.size();
    std::vector<NodeId> out;
    out.reserve(n);
    std::vector<uint8_t> done(n, 0);
    auto run = [&](NodeId id) {
      out.push_back(id);
      done[id] = 1;
      for (NodeId r : in_roots_[id]) --readers_[r];
      for (NodeId u : users_[id]) --missing_[u];
    };
    NodeId start = 0;
    while (start < n && g_.node(start).kind == NodeKind::kPlaceholder) run(start++);
    while (start < n) {
      // The segment [start, end): up to the next barrier or the output.
      NodeId end = start;
      while (end < n && !barrier_[end] && g_.node(end).kind != NodeKind::kOutput) ++end;
      schedule(start, end, done, run);
      if (end < n) run(end);
      start = end + 1;
    }
    return out;
  }

 private:
  template <typename Run>
  void schedule(NodeId start, NodeId end, const std::vector<uint8_t>& done, Run&& run) {
    std::vector<NodeId> ready;
    for (NodeId id = start; id < end; ++id)
      if (missing_[id] == 0) ready.push_back(id);
    while (!ready.empty()) {
      size_t best = 0;
      int64_t best_score = score(ready[0]);
      for (size_t k = 1; k < ready.size(); ++k) {
        const int64_t s = score(ready[k]);
        if (s < best_score || (s == best_score && ready[k] < ready[best])) {
          best = k;
          best_score = s;
        }
      }
      const NodeId id = ready[best];
      ready[best] = ready.back();
      ready.pop_back();
      run(id);
      for (NodeId u : users_[id])
        if (u >= start && u < end && !done[u] && missing_[u] == 0) ready.push_back(u);
    }
  }

  // Bytes the live count grows by when `id` runs now.
  int64_t score(NodeId id) const {
    int64_t s = bytes_[id];
    for (NodeId r : in_roots_[id])
      if (readers_[r] == 1) s -= bytes_[r];
    return s;
  }

  // Sorted, without repeats (a node reading a value twice reads it once).
  static std::vector<NodeId>& distinct(std::vector<NodeId>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  const Graph& g_;
  std::vector<NodeId> root_;
  std::vector<int64_t> bytes_;     // per root: its fresh storages
  std::vector<uint32_t> readers_;  // per root: nodes not yet run that read it
  std::vector<uint32_t> missing_;  // per node: distinct inputs not yet run
  std::vector<uint8_t> barrier_;
  std::vector<std::vector<NodeId>> in_roots_;  // per node: its inputs' roots, distinct
  std::vector<std::vector<NodeId>> users_;     // per node: its users, distinct
};

}  // namespace

OrderedBackward memory_ordered_backward(const Graph& forward, Graph backward, int num_fwd_outputs,
                                        const TorchBehavior& torch, MemoryModel model, bool kernel_orders) {
  const std::vector<NodeId> order = Greedy(backward, torch).order();
  bool identity = true;
  for (size_t k = 0; identity && k < order.size(); ++k) identity = order[k] == k;
  if (identity) return {std::move(backward), false};
  Graph reordered = GraphBuilder::rearrange(backward, order);
  const int64_t before = simulate_memory(forward, backward, num_fwd_outputs, model, kernel_orders).peak_bytes;
  const int64_t after = simulate_memory(forward, reordered, num_fwd_outputs, model, kernel_orders).peak_bytes;
  if (after < before) return {std::move(reordered), true};
  return {std::move(backward), false};
}

}  // namespace remat
