// memory/fusion.cc — what inductor materializes (memory/fusion.h).
//
// Contract: memory/fusion.h. Three linear passes: backward over the nodes
// to find the values something needs as a buffer (users come after their
// producers), forward to decide `fused` (a view follows its base, which
// comes first; each inlined value carries the buffers its expression loads,
// for the fan-out rule), backward again for `runs_at` and `last_read`; two
// more for the convolutions' layout copies and the views that copy; one
// forward over the generated kernels for the fused groups they join (each
// compared with the kernels it reads and those of the last 64, as inductor
// does; a cycle check visits at most 512 nodes), and one over the groups
// for where they run.
#include "memory/fusion.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <span>
#include <vector>

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

// A gather inductor lowers to a pointwise loop (index): embedding.
bool gathers(const Graph& g, NodeId n) { return target_is(g, n, "aten.embedding.default"); }

// Whether n allocates pinned memory (pin_memory=True).
bool pinned(const Graph& g, NodeId n) {
  const ArgId pin = dict_lookup(g, g.node(n).kwargs, "pin_memory");
  return pin != kNoArg && g.arg(pin).kind == ArgKind::kBool && g.arg(pin).i != 0;
}

// aten.rand and aten.randn as inductor's replace_random pass rewrites them
// into inductor_random (below).
bool replaced_by_inductor_random(const Graph& g, NodeId n) {
  if (!target_is(g, n, "aten.rand.default") && !target_is(g, n, "aten.randn.default")) return false;
  const auto out = g.tensors(n);
  return out.size() == 1 && g.str(out[0].dtype) == "float32" && !pinned(g, n);
}

// inductor_random's lowering realizes its loop at once (a buffer of its
// own, whoever reads it); the scheduler then drops that buffer when the
// one kernel that loads it is the kernel it fuses into
// (remove_kernel_local_buffers). So it is inlined only where one kernel
// evaluates it: see evaluated_by_one_kernel.
bool realized_at_lowering(const Graph& g, NodeId n) {
  return target_is(g, n, "prims.inductor_random.default") || replaced_by_inductor_random(g, n);
}

// The random values inductor's replace_random pass puts in the graph
// (dropout's mask starts as one): inductor lowers inductor_random,
// inductor_randint and inductor_lookup_seed to pointwise loops, though no
// torch list calls them fusible. (inductor_seeds is a fallback: a buffer.)
// A joint graph not yet through that pass (a capture, taken before
// inductor's joint-graph passes) holds what it replaces: rand and randn
// (float32: another dtype converts the float32 values; not into pinned
// memory) and randint.low.
bool random_loop(const Graph& g, NodeId n) {
  return realized_at_lowering(g, n) || target_is(g, n, "prims.inductor_randint.default") ||
         target_is(g, n, "prims.inductor_lookup_seed.default") || target_is(g, n, "aten.randint.low");
}

// A reduction's result is smaller than what it reads; inductor realizes
// reductions, so their results are buffers other kernels load. A gather's
// result may be smaller than its table, and is no reduction.
bool shrinks(const Graph& g, NodeId n) {
  if (gathers(g, n)) return false;
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

// Whether scatter-like u reads v as another argument than the copied self
// (index, src, values).
bool read_besides_self(const Graph& g, NodeId u, NodeId v) {
  for (size_t i = 1; i < 4; ++i)
    if (node_arg(g, u, i) == v) return true;
  return false;
}

// What inductor's fan-out rule (below) needs of a value inlined so far: the
// distinct buffers its inlined expression loads (capped: only "more than
// kRealizeReads" matters, and a union of capped sets still tells that) and
// whether it evaluates a transcendental op.
constexpr size_t kRealizeReads = 4;  // inductor's realize_reads_threshold

struct InlinedExpr {
  std::vector<NodeId> reads;  // sorted buffer roots, at most kRealizeReads + 1
  bool heavy = false;
};

// The buffer a materialized value lives in: a view's is its base's; a
// getitem picks a buffer of its own (each result of an extern kernel is one).
NodeId buffer_root(const Graph& g, NodeId v) {
  while (renames(g, v) && !is_getitem(g, v)) {
    const NodeId base = base_of(g, v);
    if (base == kNoNode) break;
    v = base;
  }
  return v;
}

void add_read(InlinedExpr& e, NodeId buffer) {
  if (e.reads.size() > kRealizeReads) return;
  const auto at = std::lower_bound(e.reads.begin(), e.reads.end(), buffer);
  if (at == e.reads.end() || *at != buffer) e.reads.insert(at, buffer);
}

// Ops inductor's CPU fan-out rule calls heavy: a value computing one of them
// is stored once rather than recomputed in each reader (torch >= 2.13's
// list; 2.11's is exp and sigmoid).
bool heavy_on_cpu(const Graph& g, NodeId n) {
  static const char* const kHeavy[] = {"aten.exp.default",   "aten.log.default",     "aten.log10.default",
                                       "aten.log1p.default", "aten.log2.default",    "aten.sigmoid.default",
                                       "aten.tanh.default"};
  for (const char* name : kHeavy)
    if (target_is(g, n, name)) return true;
  return false;
}

bool on_cpu(const Graph& g, NodeId n) {
  const auto ts = g.tensors(n);
  return ts.size() == 1 && device_type(g.str(ts[0].device)) == "cpu";
}

// The values an accumulating index_put u loads inside its own loop, or
// kNoNode: inductor lowers _unsafe_index_put and
// _unsafe_masked_index_put_accumulate (embedding's backward) on CPU to a
// Scatter node whose body evaluates them (no buffer of their own; the
// masked one wraps them in a where). Elsewhere they may be a fallback's
// argument (a GPU's atomic-add limits), so the model keeps their buffer.
NodeId inlined_scatter_values(const Graph& g, NodeId u) {
  size_t at = 0;
  if (target_is(g, u, "aten._unsafe_masked_index_put_accumulate.default"))
    at = 3;
  else if (target_is(g, u, "aten._unsafe_index_put.default"))
    at = 2;
  else
    return kNoNode;
  if (!on_cpu(g, u)) return kNoNode;
  const NodeId values = node_arg(g, u, at);
  for (size_t i = 0; i < at; ++i)
    if (node_arg(g, u, i) == values) return kNoNode;
  return values;
}

// On CPU inductor lowers every cat to a ConcatKernel: a buffer of its own
// (never inlined into a reader) into whose slices the kernels of its
// inputs write (realize_into), so an input computed by a generated kernel
// needs no buffer apart (read by two cats, it is stored in both).
bool concat_kernel(const Graph& g, NodeId n) {
  return target_is(g, n, "aten.cat.default") && on_cpu(g, n);
}

// inductor's post-grad addmm pattern (fx_passes/post_grad.py addmm): an
// add.Tensor of an mm that nothing else reads and a tensor `inp` of the
// mm's dtype that broadcasts to its shape becomes addmm(inp, a, b) at the
// add: one extern kernel there, no buffer for the product. On a GPU it
// stays unfused when inp is bias-like (a graph input, or broadcast along a
// dimension; should_prefer_unfused_addmm, for the bias's epilogue fusion).
// The mm, or kNoNode. `reader_counts` as in inductor_inlined.
NodeId addmm_product(const Graph& g, NodeId add, const std::function<bool(NodeId)>& reader_counts) {
  if (!target_is(g, add, "aten.add.Tensor")) return kNoNode;
  const ArgId kw = g.node(add).kwargs;
  if (kw != kNoArg && g.arg(kw).span > 1) return kNoNode;  // alpha
  const NodeId a0 = node_arg(g, add, 0), a1 = node_arg(g, add, 1);
  if (a0 == kNoNode || a1 == kNoNode || a0 == a1) return kNoNode;
  const NodeId mm = target_is(g, a0, "aten.mm.default") ? a0 : target_is(g, a1, "aten.mm.default") ? a1 : kNoNode;
  if (mm == kNoNode) return kNoNode;
  const NodeId inp = mm == a0 ? a1 : a0;
  for (NodeId u : g.users(mm))
    if (u != add && (g.node(u).kind == NodeKind::kOutput || reader_counts(u))) return kNoNode;
  const auto out = g.tensors(mm), in = g.tensors(inp);
  if (out.size() != 1 || in.size() != 1 || in[0].dtype != out[0].dtype) return kNoNode;
  const auto os = g.shape(out[0]), is = g.shape(in[0]);
  if (is.size() > os.size()) return kNoNode;
  bool broadcast = is.size() != os.size();
  for (size_t k = 0; k < is.size(); ++k) {
    const int64_t d = is[is.size() - 1 - k].value, o = os[os.size() - 1 - k].value;
    if (d != o && d != 1) return kNoNode;
    broadcast = broadcast || (d == 1 && o != 1);
  }
  const bool bias_like = broadcast || g.node(inp).kind == NodeKind::kPlaceholder ||
                         g.node(inp).kind == NodeKind::kGetAttr;
  if (!on_cpu(g, mm) && bias_like) return kNoNode;
  return mm;
}

// inductor's fan-out realization (GraphLowering.run_node's mark_reuse): a
// pointwise value that more than one node reads is stored in a buffer of
// its own, instead of inlined into every reader, when its inlined
// expression loads more than kRealizeReads buffers or, on CPU, computes a
// heavy op. `readers`: its distinct readers that count.
bool realized_on_reuse(const Graph& g, NodeId v, size_t readers, const InlinedExpr& e) {
  if (readers < 2) return false;
  return e.reads.size() > kRealizeReads || (e.heavy && on_cpu(g, v));
}

// The distinct nodes reading v that count (reader_counts, as in
// inductor_inlined), the output node included, in node order.
std::vector<NodeId> counted_readers(const Graph& g, NodeId v, const std::function<bool(NodeId)>& reader_counts) {
  std::vector<NodeId> readers;
  for (NodeId u : g.users(v))
    if (g.node(u).kind == NodeKind::kOutput || reader_counts(u)) readers.push_back(u);
  std::sort(readers.begin(), readers.end());
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  return readers;
}

// Whether the inlined value v is evaluated by one kernel: it has one
// reader, and so does each inlined reader on the way to the first
// materialized one (an inlined value is evaluated in every kernel of its
// readers). The output node reads only buffers.
bool evaluated_by_one_kernel(const Graph& g, NodeId v, const std::vector<uint8_t>& fused,
                             const std::function<bool(NodeId)>& reader_counts) {
  for (NodeId at = v; fused[at];) {
    const std::vector<NodeId> readers = counted_readers(g, at, reader_counts);
    if (readers.empty()) return true;  // read by nothing that counts: no kernel at all
    if (readers.size() > 1) return false;
    at = readers[0];
  }
  return true;
}

// Whether g runs a convolution (forward or backward) on CPU: inductor's
// layout optimization then lays the net's activations out channels-last.
bool convolves_on_cpu(const Graph& g) {
  for (NodeId v = 0; v < g.size(); ++v) {
    if (!target_is(g, v, "aten.convolution.default") && !target_is(g, v, "aten.convolution_backward.default"))
      continue;
    const NodeId x = node_arg(g, v, 0);
    const auto ts = x == kNoNode ? std::span<const TensorMeta>{} : g.tensors(x);
    if (ts.size() == 1 && device_type(g.str(ts[0].device)) == "cpu") return true;
  }
  return false;
}

// A view that folds a 4-d activation's channels into its batch, (N, C, H, W)
// to (N*C, H*W): a view of contiguous memory, but a copy of the
// channels-last buffer inductor keeps such an activation in (max-pool's
// backward scatters over that shape). Views of what was 2-d (a matmul's
// result) stay views.
void find_view_copies(const Graph& g, InductorFusion& f) {
  if (!convolves_on_cpu(g)) return;
  for (NodeId v = 0; v < g.size(); ++v) {
    if (!renames(g, v) || is_getitem(g, v)) continue;
    const NodeId in = base_of(g, v);
    if (in == kNoNode) continue;
    const auto out = g.tensors(v), ins = g.tensors(in), roots = g.tensors(buffer_root(g, in));
    if (out.size() != 1 || ins.size() != 1 || roots.size() != 1 || out[0].rank != 2 || ins[0].rank != 4 ||
        roots[0].rank != 4)
      continue;
    const auto from = g.shape(ins[0]), to = g.shape(out[0]);
    if (from[1].value > 1 && from[2].value * from[3].value > 1 && to[0].value == from[0].value * from[1].value)
      f.view_copy[v] = 1;
  }
}

// How a generated kernel's loop nest looks to inductor's CPU fusion
// (cpp.py's group checks): `numel` elements iterated (a pointwise op's
// result; what a reduction reads), `kept` of them per reduced row (the
// result's size; numel for a pointwise op), and whether the reduced
// dimensions trail the kept ones (a row reduction runs in the same loop
// nest as a pointwise op of its input's shape).
struct LoopNest {
  int64_t numel = 0, kept = 0;
  bool trailing = true;
};

LoopNest loop_nest(const Graph& g, NodeId n) {
  const auto out = g.tensors(n);
  LoopNest l;
  if (out.empty()) return l;
  l.numel = l.kept = out[0].numel_hint;
  NodeId widest = kNoNode;
  for (NodeId in : g.inputs(n))
    for (const TensorMeta& t : g.tensors(in))
      if (t.numel_hint > l.numel) {
        l.numel = t.numel_hint;
        widest = in;
      }
  if (widest == kNoNode) return l;
  const auto shape = g.shape(g.tensors(widest)[0]);
  // The reduced dimensions, when the op names them (sum.dim_IntList,
  // var_mean.correction, amax, ...): trailing when they are the last ones.
  const ArgId dims = positional(g, n, 1);
  if (dims != kNoArg && g.arg(dims).kind == ArgKind::kList && g.arg(dims).span > 1) {
    const auto rank = static_cast<int64_t>(shape.size());
    int64_t lowest = rank, count = 0;
    for (ArgId a = dims + 1; a < dims + g.arg(dims).span; a += g.arg(a).span) {
      if (g.arg(a).kind != ArgKind::kInt) return l;
      lowest = std::min(lowest, (g.arg(a).i % rank + rank) % rank);
      ++count;
    }
    l.trailing = lowest == rank - count;
    return l;
  }
  // Otherwise: the kept elements must be a leading prefix of the input.
  int64_t prefix = 1;
  l.trailing = l.kept == 1;
  for (const auto& d : shape) {
    if (prefix == l.kept) l.trailing = true;
    prefix *= d.value;
  }
  return l;
}

// Whether inductor's CPU scheduler may put kernels with loop nests a and b
// in one kernel: the same nest; a pointwise op over a row reduction's input;
// or (`reads`: one reads the other's result) a pointwise op over the
// reduction's rows (outer-loop fusion).
bool same_loop(const LoopNest& a, const LoopNest& b, bool reads) {
  if (a.numel == 0 || b.numel == 0) return false;
  if (a.numel == b.numel && a.kept == b.kept && a.trailing == b.trailing) return true;
  const bool a_pw = a.numel == a.kept, b_pw = b.numel == b.kept;
  if (a_pw == b_pw) return false;
  const LoopNest& pw = a_pw ? a : b;
  const LoopNest& red = a_pw ? b : a;
  // Outer-loop fusion shares the loops over the kept elements, wherever the
  // reduced dimensions lie.
  return (red.trailing && pw.numel == red.numel) || (reads && pw.numel == red.kept);
}

// The buffers generated kernel v loads: its materialized inputs' and what
// its inlined inputs load, up to kMaxLoads of them.
constexpr size_t kMaxLoads = 16;

std::vector<NodeId> kernel_loads(const Graph& g, const std::vector<uint8_t>& fused, NodeId v,
                                 bool* complete = nullptr) {
  std::vector<NodeId> loads, stack(g.inputs(v).begin(), g.inputs(v).end()), seen;
  while (!stack.empty() && loads.size() < kMaxLoads && seen.size() < 4 * kMaxLoads) {
    const NodeId in = stack.back();
    stack.pop_back();
    if (std::find(seen.begin(), seen.end(), in) != seen.end()) continue;
    seen.push_back(in);
    if (fused[in]) {
      for (NodeId x : g.inputs(in)) stack.push_back(x);
      continue;
    }
    // A getitem's buffer is written by the kernel it picks from.
    const NodeId picked = buffer_root(g, in);
    const NodeId root = is_getitem(g, picked) && base_of(g, picked) != kNoNode ? base_of(g, picked) : picked;
    if (std::find(loads.begin(), loads.end(), root) == loads.end()) loads.push_back(root);
  }
  if (complete != nullptr) *complete = stack.empty();
  return loads;
}

// inductor's scheduler (Scheduler.fuse_nodes, up to ten rounds, so fused
// groups merge further) fuses two generated kernels when one reads the
// other's result (vertical: at any distance) or both load a buffer
// (horizontal: only within 64 scheduler nodes of each other,
// are_long_distant_nodes), their loop nests fuse, the group stays within 64
// nodes (max_fusion_size), and fusing makes no cycle (no path from one
// member to another through a node outside the group). After fusing, its
// topological sort runs each group once everything it reads is ready.
constexpr size_t kFusionWindow = 64;
constexpr size_t kMaxFusionSize = 64;
// Nodes one cycle check may visit; past that it assumes a cycle (no fusion),
// which keeps the pass linear on graphs of 50,000 nodes.
constexpr size_t kCycleSearch = 512;

class KernelGroups {
 public:
  KernelGroups(const Graph& g, const std::vector<std::vector<NodeId>>& loads)
      : g_(g), loads_(loads), parent_(g.size()), members_(g.size()), seen_(g.size(), 0) {
    for (NodeId v = 0; v < g.size(); ++v) {
      parent_[v] = v;
      members_[v] = {v};
    }
  }

  // A group's root is its earliest member.
  NodeId find(NodeId v) {
    while (parent_[v] != v) v = parent_[v] = parent_[parent_[v]];
    return v;
  }
  const std::vector<NodeId>& members(NodeId root) const { return members_[root]; }

  // Whether the groups of a and b may become one (size and cycles).
  bool may_merge(NodeId a, NodeId b) {
    a = find(a), b = find(b);
    return a != b && members_[a].size() + members_[b].size() <= kMaxFusionSize && !would_cycle(a, b);
  }

  void merge(NodeId a, NodeId b) {
    a = find(a), b = find(b);
    if (b < a) std::swap(a, b);
    std::vector<NodeId> all;
    all.reserve(members_[a].size() + members_[b].size());
    std::merge(members_[a].begin(), members_[a].end(), members_[b].begin(), members_[b].end(),
               std::back_inserter(all));
    members_[a] = std::move(all);
    members_[b].clear();
    parent_[b] = a;
  }

 private:
  // A cycle needs a buffer some member loads, written after the union's
  // first member by a node outside it, that depends on a member. Not
  // through a scatter that reads a member directly (or through views and
  // getitems): inductor fuses such a scatter into the members' kernel
  // (max_min_dim's backward: the scatter of a row sum, and the gradient
  // that adds it, are one kernel with that sum), which the model, keeping
  // scatters apart, would read as a cycle.
  bool would_cycle(NodeId a, NodeId b) {
    const NodeId head = std::min(a, b);
    ++stamp_;
    size_t visits = 0;
    std::vector<std::pair<NodeId, bool>> stack;  // a node, reached from a scatter
    for (NodeId root : {a, b})
      for (NodeId m : members_[root])
        for (NodeId x : loads_[m]) {
          const NodeId r = find(x);
          if (x > head && r != a && r != b) stack.emplace_back(x, false);
        }
    while (!stack.empty()) {
      const auto [y, from_scatter] = stack.back();
      stack.pop_back();
      const NodeId r = find(y);
      if (r == a || r == b) {
        if (from_scatter) continue;
        return true;
      }
      if (seen_[y] == stamp_) continue;
      seen_[y] = stamp_;
      if (++visits > kCycleSearch) return true;
      // What a scatter reads through views and getitems, it reads directly.
      const bool scatter = inductor_scatters_into_copy(g_, y) || (from_scatter && renames(g_, y));
      for (NodeId in : g_.inputs(y))
        if (in >= head) stack.emplace_back(in, scatter);
    }
    return false;
  }

  const Graph& g_;
  const std::vector<std::vector<NodeId>>& loads_;
  std::vector<NodeId> parent_;
  std::vector<std::vector<NodeId>> members_;
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
};

// Whether generated kernels u and v (v later) may fuse by their buffers and
// loop nests: v reads u, or (within the window of u's group's first member,
// `head`) they load a common buffer.
bool fusible_pair(const std::vector<std::vector<NodeId>>& loads, const std::vector<LoopNest>& nest,
                  const std::vector<size_t>& rank, NodeId u, NodeId v, NodeId head) {
  const auto& lv = loads[v];
  const bool reads_u = std::find(lv.begin(), lv.end(), u) != lv.end();
  bool shares = reads_u;
  for (NodeId b : loads[u]) shares = shares || std::find(lv.begin(), lv.end(), b) != lv.end();
  if (!shares || !same_loop(nest[u], nest[v], reads_u)) return false;
  return reads_u || rank[v] - rank[head] <= kFusionWindow;
}

// Where each group runs (the topological sort after fusing): at its first
// member when everything it loads is written by then, else at its first
// member after the last such write. A member before that place runs late:
// runs_at, so what it reads lives until then (its result stays allocated
// at its own place: the safe side for the optimizer's rows); a member after
// it, across an extern kernel, allocates there (kernel_at).
void place_groups(const Graph& g, KernelGroups& groups, InductorFusion& f) {
  const size_t n = g.size();
  std::vector<size_t> externs(n + 1, 0);  // extern kernels before each node
  for (NodeId v = 0; v < n; ++v) externs[v + 1] = externs[v] + f.external[v];
  for (NodeId root = 0; root < n; ++root) {
    const auto& members = groups.members(root);
    if (groups.find(root) != root || members.size() < 2) continue;
    NodeId last_write = root;
    for (NodeId m : members)
      for (NodeId x : f.loads[m])
        if (x > last_write && groups.find(x) != root) last_write = x;
    const NodeId place = *std::lower_bound(members.begin(), members.end(), last_write);
    for (NodeId m : members) {
      f.group[m] = root;
      if (m < place)
        f.runs_at[m] = place;
      else if (externs[m] > externs[place + 1])
        f.kernel_at[m] = place;
    }
  }
}

void find_kernel_groups(const Graph& g, InductorFusion& f, std::span<const NodeId> within) {
  const size_t n = g.size();
  f.kernel_at.resize(n);
  f.group.resize(n);
  for (NodeId v = 0; v < n; ++v) f.group[v] = v;
  std::vector<LoopNest> nest(n);
  std::vector<uint8_t> kernel(n, 0);  // a generated kernel that may fuse
  std::vector<NodeId> kernels;  // generated kernels so far
  std::vector<size_t> rank(n, 0);  // kernels and extern kernels, counted
  f.loads.assign(n, {});
  f.loads_partial.assign(n, 0);
  size_t materialized = 0;
  for (NodeId v = 0; v < n; ++v) {
    f.kernel_at[v] = v;
    if (f.external[v] || f.in_kernel[v]) rank[v] = ++materialized;
    if (!f.in_kernel[v] || f.view_copy[v]) continue;
    bool complete = true;
    f.loads[v] = kernel_loads(g, f.fused, v, &complete);
    f.loads_partial[v] = !complete;
    nest[v] = loop_nest(g, v);
    kernel[v] = complete;  // a kernel whose loads are not all known stays alone
  }
  KernelGroups groups(g, f.loads);
  for (NodeId v = 0; v < n; ++v) {
    if (!kernel[v]) continue;
    // The kernels v reads, at any distance; then those of the window.
    std::vector<NodeId> candidates;
    for (NodeId x : f.loads[v])
      if (kernel[x]) candidates.push_back(x);
    for (auto it = kernels.rbegin(); it != kernels.rend() && rank[v] - rank[*it] <= kFusionWindow; ++it)
      candidates.push_back(*it);
    for (NodeId u : candidates) {
      const NodeId head = std::min(groups.find(u), groups.find(v));
      if (!within.empty() && within[u] != within[v]) continue;
      if (fusible_pair(f.loads, nest, rank, u, v, head) && groups.may_merge(u, v)) groups.merge(u, v);
    }
    kernels.push_back(v);
  }
  place_groups(g, groups, f);
}

}  // namespace

bool inductor_scatters_into_copy(const Graph& g, NodeId n) {
  static const char* const kScatters[] = {
      "aten.scatter.src",          "aten.scatter.value",          "aten.scatter.reduce",
      "aten.scatter.value_reduce", "aten.scatter_add.default",    "aten.scatter_reduce.two",
      "aten.index_put.default",    "aten._unsafe_index_put.default", "aten.as_strided_scatter.default",
      "aten._unsafe_masked_index_put_accumulate.default"};
  if (g.node(n).kind != NodeKind::kCallFunction) return false;
  for (const char* name : kScatters)
    if (target_is(g, n, name)) return true;
  return false;
}

bool inductor_fusible(const Graph& g, NodeId n) {
  if (g.node(n).kind != NodeKind::kCallFunction) return false;
  const OpInfo* op = g.op(n);
  if (op == nullptr) return false;
  if (renames(g, n)) return true;
  if (op->is_mutable) return false;
  // Scatters inductor lowers to a pointwise loop (a where over the index),
  // though no torch list calls them fusible.
  if (target_is(g, n, "aten.select_scatter.default") || target_is(g, n, "aten.slice_scatter.default")) return true;
  if (gathers(g, n)) return true;
  if (random_loop(g, n)) return true;
  if (concat_kernel(g, n)) return true;
  // torch's own lists (the newest release's): the ops its partitioner
  // treats as fusible are the ones inductor lowers to inlinable loops.
  static const TorchBehavior kNewest;
  return (OpRegistry::defaults().categories(g, *op, kNewest) & kCatFusible) != 0;
}

bool inductor_may_write_in_place(const Graph& g, NodeId n) {
  if (!inductor_fusible(g, n) || renames(g, n) || concat_kernel(g, n)) return false;
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
  std::vector<NodeId> product(n, kNoNode);  // the mm an addmm add takes in
  for (NodeId v = 0; v < n; ++v) {
    if (g.node(v).kind != NodeKind::kOutput && reader_counts(v)) product[v] = addmm_product(g, v, reader_counts);
    fusible[v] = product[v] == kNoNode && inductor_fusible(g, v);
  }
  for (NodeId u = static_cast<NodeId>(n); u-- > 0;) {
    if (g.node(u).kind != NodeKind::kOutput && !reader_counts(u)) continue;
    const bool inlines = fusible[u] && !(renames(g, u) && needs_buffer[u]);
    if (inlines) continue;
    // The output node, an extern kernel, or a renaming something needs as
    // a buffer: what it reads must be a buffer too; but the tensor a
    // scatter copies is evaluated into that copy (it may be inlined).
    const NodeId copied = inductor_scatters_into_copy(g, u) ? node_arg(g, u, 0) : kNoNode;
    const NodeId values = inlined_scatter_values(g, u);
    for (NodeId v : g.inputs(u)) {
      if (v == values) continue;
      if (v != copied || read_besides_self(g, u, v)) needs_buffer[v] = 1;
    }
  }
  std::vector<InlinedExpr> expr(n);
  for (NodeId v = 0; v < n; ++v) {
    if (!fusible[v]) continue;
    if (renames(g, v)) {
      const NodeId base = base_of(g, v);
      fused[v] = base != kNoNode && fused[base];
      if (fused[v]) expr[v] = expr[base];
      continue;
    }
    fused[v] = !(needs_buffer[v] || g.node(v).tensors_count != 1 || shrinks(g, v) || concat_kernel(g, v));
    if (!fused[v]) continue;
    // What v's kernel body loads: its materialized inputs' buffers, and
    // what its inlined inputs load.
    InlinedExpr& e = expr[v];
    e.heavy = heavy_on_cpu(g, v);
    for (NodeId in : g.inputs(v)) {
      if (!fused[in]) {
        add_read(e, buffer_root(g, in));
        continue;
      }
      e.heavy = e.heavy || expr[in].heavy;
      for (NodeId r : expr[in].reads) add_read(e, r);
    }
    const std::vector<NodeId> readers = counted_readers(g, v, reader_counts);
    // Realized for a cat, a value lives in the cat's slice (realize_into).
    const bool into_cat = std::any_of(readers.begin(), readers.end(), [&](NodeId u) { return concat_kernel(g, u); });
    if (!into_cat && realized_on_reuse(g, v, readers.size(), e)) {
      fused[v] = 0;
      e = InlinedExpr{};
    }
  }
  // A value realized at lowering keeps its buffer unless one kernel
  // evaluates it. Whether its readers are inlined is known only once the
  // pass above (in node order) is done, so this follows it; keeping the
  // buffer changes nothing the pass decided: such a value loads its seed
  // alone, too few buffers to make a reader realized.
  for (NodeId v = 0; v < n; ++v)
    if (fused[v] && realized_at_lowering(g, v) && !evaluated_by_one_kernel(g, v, fused, reader_counts)) fused[v] = 0;
  // An addmm's product gets no buffer (the add, an extern kernel, is the
  // result).
  for (NodeId v = 0; v < n; ++v)
    if (product[v] != kNoNode) fused[product[v]] = 1;
  return fused;
}

InductorFusion inductor_fusion(const Graph& g, std::span<const NodeId> within) {
  const size_t n = g.size();
  InductorFusion f;
  f.fused = inductor_inlined(g, [](NodeId) { return true; });
  f.inplace.assign(n, 0);
  f.runs_at.assign(n, kNoNode);
  f.last_read.assign(n, kNoNode);
  f.copy_from.assign(n, kNoNode);
  f.copy_until.assign(n, kNoNode);
  f.view_copy.assign(n, 0);
  find_layout_copies(g, f);
  find_view_copies(g, f);
  f.in_kernel.assign(n, 0);
  f.external.assign(n, 0);
  const auto every_reader = [](NodeId) { return true; };
  for (NodeId v = 0; v < n; ++v) {
    const bool addmm = addmm_product(g, v, every_reader) != kNoNode;
    f.inplace[v] = !f.fused[v] && !addmm && inductor_may_write_in_place(g, v);
    if (g.node(v).kind != NodeKind::kCallFunction || f.fused[v]) continue;
    const bool fusible = !addmm && inductor_fusible(g, v);
    f.in_kernel[v] = f.view_copy[v] || (fusible && !renames(g, v));
    f.external[v] = !fusible;
  }
  find_kernel_groups(g, f, within);
  for (NodeId v = static_cast<NodeId>(n); v-- > 0;) {
    const Node& node = g.node(v);
    if (node.kind == NodeKind::kOutput) continue;
    NodeId latest = kNoNode;
    for (NodeId u : g.users(v)) {
      const NodeId at = g.node(u).kind == NodeKind::kOutput ? u : f.runs_at[u];
      latest = latest == kNoNode ? at : std::max(latest, at);
    }
    f.last_read[v] = latest;
    if (f.fused[v] && latest != kNoNode)
      f.runs_at[v] = latest;
    else if (f.runs_at[v] == kNoNode)  // not a member that runs late (place_groups)
      f.runs_at[v] = v;
  }
  return f;
}

}  // namespace remat::memory
