// memory/fusion.cc — what inductor materializes (memory/fusion.h).
//
// Contract: memory/fusion.h. Three linear passes: backward over the nodes
// to find the values something needs as a buffer (users come after their
// producers), forward to decide `fused` (a view follows its base, which
// comes first), backward again for `runs_at` and `last_read`; one more for
// the convolutions' layout copies.
#include "memory/fusion.h"

#include <algorithm>
#include <functional>

#include "graph/query.h"
#include "memory/bytes.h"
#include "remat/ops.h"
#include "remat/torch_release.h"

namespace remat::memory {
namespace {

// A node that only renames its base's storage: a view op or a getitem.
bool renames(const Graph& g, NodeId n) {
  const OpInfo* op = g.op(n);
  return op != nullptr && (op->is_view || is_getitem(g, n));
}

// The node a renaming node renames (its first node argument).
NodeId base_of(const Graph& g, NodeId n) {
  const auto inputs = g.inputs(n);
  return inputs.empty() ? kNoNode : inputs[0];
}

// A reduction's result is smaller than what it reads; inductor realizes
// reductions, so their results are buffers other kernels load.
bool shrinks(const Graph& g, NodeId n) {
  const auto out = g.tensors(n);
  if (out.size() != 1) return false;
  int64_t largest = 0;
  for (NodeId in : g.inputs(n))
    for (const TensorMeta& t : g.tensors(in)) largest = std::max(largest, t.numel_hint);
  return out[0].numel_hint < largest;
}

// A 4-d tensor inductor must copy to run a channels-last convolution on it:
// on CPU, with more than one channel, and not channels-last already.
bool needs_channels_last_copy(const Graph& g, NodeId p) {
  const auto ts = g.tensors(p);
  if (ts.size() != 1 || ts[0].rank != 4 || device_type(g.str(ts[0].device)) != "cpu") return false;
  const auto shape = g.shape(ts[0]);
  if (shape[1].value <= 1) return false;
  return !ts[0].has_stride || g.stride(ts[0])[1].value != 1;
}

// The first and last convolution reading each placeholder that needs a
// channels-last copy.
void find_layout_copies(const Graph& g, InductorFusion& f) {
  for (NodeId v = 0; v < g.size(); ++v) {
    if (!target_is(g, v, "aten.convolution.default")) continue;
    for (size_t i = 0; i < 2; ++i) {
      const NodeId p = node_arg(g, v, i);
      if (p == kNoNode || g.node(p).kind != NodeKind::kPlaceholder || !needs_channels_last_copy(g, p))
        continue;
      if (f.copy_from[p] == kNoNode) f.copy_from[p] = v;
      f.copy_until[p] = v;
    }
  }
}

}  // namespace

bool inductor_fusible(const Graph& g, NodeId n) {
  if (g.node(n).kind != NodeKind::kCallFunction) return false;
  const OpInfo* op = g.op(n);
  if (op == nullptr) return false;
  if (renames(g, n)) return true;
  if (op->is_mutable) return false;
  // torch's own lists (the newest release's): the ops its partitioner
  // treats as fusible are the ones inductor lowers to inlinable loops.
  static const TorchBehavior kNewest;
  return (OpRegistry::defaults().categories(g, *op, kNewest) & kCatFusible) != 0;
}

bool inductor_may_write_in_place(const Graph& g, NodeId n) {
  if (!inductor_fusible(g, n) || renames(g, n)) return false;
  const auto out = g.tensors(n);
  if (out.size() != 1) return false;
  const int64_t bytes = allocation_bytes(g, out[0]);
  for (NodeId in : g.inputs(n))
    for (const TensorMeta& t : g.tensors(in))
      if (allocation_bytes(g, t) == bytes) return true;
  return false;
}

std::vector<uint8_t> inductor_inlined(const Graph& g, const std::function<bool(NodeId)>& reader_counts) {
  const size_t n = g.size();
  std::vector<uint8_t> fused(n, 0), fusible(n, 0), needs_buffer(n, 0);
  for (NodeId v = 0; v < n; ++v) fusible[v] = inductor_fusible(g, v);
  for (NodeId u = static_cast<NodeId>(n); u-- > 0;) {
    if (g.node(u).kind != NodeKind::kOutput && !reader_counts(u)) continue;
    const bool inlines = fusible[u] && !(renames(g, u) && needs_buffer[u]);
    if (inlines) continue;
    // The output node, an extern kernel, or a renaming something needs as
    // a buffer: what it reads must be a buffer too.
    for (NodeId v : g.inputs(u)) needs_buffer[v] = 1;
  }
  for (NodeId v = 0; v < n; ++v) {
    if (!fusible[v]) continue;
    if (renames(g, v)) {
      const NodeId base = base_of(g, v);
      fused[v] = base != kNoNode && fused[base];
      continue;
    }
    fused[v] = !(needs_buffer[v] || g.node(v).tensors_count != 1 || shrinks(g, v));
  }
  return fused;
}

InductorFusion inductor_fusion(const Graph& g) {
  const size_t n = g.size();
  InductorFusion f;
  f.fused = inductor_inlined(g, [](NodeId) { return true; });
  f.inplace.assign(n, 0);
  f.runs_at.assign(n, kNoNode);
  f.last_read.assign(n, kNoNode);
  f.copy_from.assign(n, kNoNode);
  f.copy_until.assign(n, kNoNode);
  find_layout_copies(g, f);
  for (NodeId v = 0; v < n; ++v)
    f.inplace[v] = !f.fused[v] && inductor_may_write_in_place(g, v);
  for (NodeId v = static_cast<NodeId>(n); v-- > 0;) {
    const Node& node = g.node(v);
    if (node.kind == NodeKind::kOutput) continue;
    NodeId latest = kNoNode;
    for (NodeId u : g.users(v)) {
      const NodeId at = g.node(u).kind == NodeKind::kOutput ? u : f.runs_at[u];
      latest = latest == kNoNode ? at : std::max(latest, at);
    }
    f.last_read[v] = latest;
    f.runs_at[v] = f.fused[v] && latest != kNoNode ? latest : v;
  }
  return f;
}

}  // namespace remat::memory
