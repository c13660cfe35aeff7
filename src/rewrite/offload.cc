// rewrite/offload.cc — offload_activations: torch 2.13's activation
// offloading.
//
// Contract: offload.h.
//
// The pass builds each graph once with its new nodes in place (forward:
// offloads after the last effective use; backward: renamed placeholders and
// reloads before the first use), then, when torch would move nodes around
// (sinking waits, prefetching reloads), replays those moves on the node
// order and rearranges the graph in one copy.
#include "rewrite/offload.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "graph/copy.h"
#include "graph/query.h"
#include "remat/error.h"
#include "rewrite/node_builder.h"

namespace remat {
namespace {

constexpr std::string_view kCpuOffloadPrefix = "cpu_offload_";
constexpr std::string_view kGpuReloadPrefix = "gpu_reload_";
constexpr std::string_view kDevicePut = "prims.device_put.default";
constexpr std::string_view kAoOffload = "ao.offload.default";
constexpr std::string_view kAoReload = "ao.reload.default";
constexpr std::string_view kAoWait = "ao.wait_tensor.default";

bool calls(const Graph& g, NodeId id, std::string_view op_name) {
  return target_is(g, id, op_name);
}

bool is_view(const Graph& g, NodeId id, const PartitionOptions& options) {
  const OpInfo* op = g.op(id);
  return g.node(id).kind == NodeKind::kCallFunction && op != nullptr &&
         (options.ops.categories(g, *op, options.torch) & kCatView) != 0;
}

// Python's str.replace: every occurrence.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

// Tensor.is_contiguous() on size hints: dims of size 1 may have any stride.
bool is_contiguous(const Graph& g, const TensorMeta& t) {
  if (!t.has_stride) return true;
  const auto shape = g.shape(t);
  const auto stride = g.stride(t);
  for (const Dim& d : shape) {
    if (d.value == 0) return true;  // an empty tensor is contiguous
  }
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k].value == 1) continue;
    if (stride[k].value != expected) return false;
    expected *= shape[k].value;
  }
  return true;
}

// The single tensor a node's value is, or null.
const TensorMeta* tensor_value(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.value != ValueKind::kTensor || n.tensors_count != 1) return nullptr;
  return &g.tensors(id)[0];
}

// The output node's returned items (the first argument's elements).
std::vector<ArgId> output_items(const Graph& g) {
  const NodeId out = g.output();
  if (out == kNoNode || g.node(out).args == kNoArg) return {};
  std::vector<ArgId> top = g.children(g.node(out).args);
  if (top.empty()) return {};
  const Arg& values = g.arg(top[0]);
  if (values.kind != ArgKind::kTuple && values.kind != ArgKind::kList) return {top[0]};
  return g.children(top[0]);
}

NodeId item_node(const Graph& g, ArgId item) {
  const Arg& a = g.arg(item);
  return a.kind == ArgKind::kNode ? static_cast<NodeId>(a.id) : kNoNode;
}

// --- building blocks for created nodes ------------------------------------

using build::empty;
using build::op_in;

// {"non_blocking": True}
ArgId non_blocking_kwargs(GraphBuilder& b) {
  const ArgId d = b.begin(ArgKind::kDict);
  build::str(b, "non_blocking");
  build::boolean(b, true);
  b.end(d);
  return d;
}

// A fresh tensor entry: `like`'s dtype and layout on `device`, with storage
// `storage`. Dims are shared: the builder appends to `like`'s value pool.
uint32_t tensor_on(GraphBuilder& b, const TensorMeta& like, StrId device, int64_t storage) {
  TensorMeta t = like;
  t.device = device;
  t.storage = storage;
  t.index = 0;
  return b.add_tensor(t);
}

// A call_function node made by this pass whose value is tensor `tensor`.
Node created(GraphBuilder& b, std::string_view name, OpId op, std::string_view target,
             uint32_t tensor) {
  Node n;
  n.name = b.intern(name);
  n.kind = NodeKind::kCallFunction;
  n.value = ValueKind::kTensor;
  n.flags = kFlagTensorMeta;
  n.target = b.intern(target);
  n.op = op;
  n.tensors_begin = tensor;
  n.tensors_count = 1;
  n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  n.origin = kCreatedNode;
  return n;
}

int64_t next_storage(const Graph& g) {
  int64_t m = -1;
  const ValuePool& values = g.values();
  for (uint32_t i = 0; i < values.sizes().tensors; ++i) m = std::max(m, values.tensors(i)->storage);
  return m + 1;
}

// --- forward ----------------------------------------------------------------

// The forward nodes torch marks saved_for_offloading, in graph order.
std::vector<NodeId> choose(const Graph& fw, int num_fwd_outputs, const PartitionOptions& options) {
  const std::vector<ArgId> items = output_items(fw);
  std::vector<uint8_t> is_output(fw.size(), 0), is_model_output(fw.size(), 0);
  for (size_t k = 0; k < items.size(); ++k) {
    const NodeId id = item_node(fw, items[k]);
    if (id == kNoNode) continue;
    is_output[id] = 1;
    if (k < static_cast<size_t>(std::max(num_fwd_outputs, 0))) is_model_output[id] = 1;
  }
  std::vector<NodeId> chosen;
  for (NodeId id = 0; id < fw.size(); ++id) {
    if (!fw.node(id).has(kFlagShouldOffload)) continue;
    if (!is_output[id] || is_model_output[id]) continue;
    if (is_view(fw, id, options) || calls(fw, id, "operator.getitem")) continue;
    const Node& n = fw.node(id);
    if (n.value == ValueKind::kTensor && n.tensors_count == 1 && !is_contiguous(fw, fw.tensors(id)[0]))
      continue;
    chosen.push_back(id);
  }
  return chosen;
}

// The last of x's users other than the output, following views to their
// users; x itself when there is none.
NodeId last_effective_user(const Graph& fw, NodeId x, const PartitionOptions& options) {
  NodeId last = kNoNode;
  std::vector<NodeId> stack{x};
  std::vector<uint8_t> seen(fw.size(), 0);
  while (!stack.empty()) {
    const NodeId v = stack.back();
    stack.pop_back();
    for (NodeId u : fw.users(v)) {
      if (fw.node(u).kind == NodeKind::kOutput || seen[u]) continue;
      seen[u] = 1;
      last = last == kNoNode ? u : std::max(last, u);
      if (is_view(fw, u, options)) stack.push_back(u);
    }
  }
  return last == kNoNode ? x : last;
}

struct Offloaded {
  NodeId x = kNoNode;     // in the old forward
  NodeId anchor = kNoNode;
  std::string offload_name, wait_name;  // wait_name empty on the sync path
  NodeId made = kNoNode;  // the node the output returns (new forward)
  uint32_t cpu_tensor = 0;
};

// `device_meta`: the offloaded nodes also record their own device as meta
// original_device (torch 2.11 and 2.12; offload_reload_layout off).
Graph rewrite_forward(const Graph& fw, std::vector<Offloaded>& offs, bool async, bool device_meta) {
  const size_t n = fw.size();
  // Insertions after one anchor run in reverse: FX's inserting_after puts
  // each new node right after the anchor, ahead of earlier ones.
  std::vector<std::vector<size_t>> after(n);
  for (size_t k = 0; k < offs.size(); ++k) after[offs[k].anchor].push_back(k);
  std::vector<int32_t> off_of(n, -1);
  for (size_t k = 0; k < offs.size(); ++k) off_of[offs[k].x] = static_cast<int32_t>(k);

  GraphBuilder b(fw);
  NodeCopier copier(fw, b);
  const OpId device_put = async ? kNoOp : op_in(fw, copier, b, kDevicePut);
  const OpId offload = async ? op_in(fw, copier, b, kAoOffload) : kNoOp;
  const OpId wait = async ? op_in(fw, copier, b, kAoWait) : kNoOp;
  const StrId cpu = b.intern("cpu");
  int64_t storage = next_storage(fw);
  for (Offloaded& o : offs) o.cpu_tensor = tensor_on(b, *tensor_value(fw, o.x), cpu, storage++);

  std::vector<NodeId> remap(n, kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    const Node& src = fw.node(id);
    if (src.kind == NodeKind::kOutput) {
      // The output returns each offloaded node's CPU copy in its place (the
      // last one made, should a node be listed twice).
      std::vector<NodeId> out_remap = remap;
      for (const Offloaded& o : offs) out_remap[o.x] = o.made;
      copier.copy(id, out_remap);
      continue;
    }
    if (off_of[id] >= 0) {
      Node x;
      copier.copy_value(id, x);
      x.flags |= kFlagSavedForOffloading;
      x.args = copier.copy_args(src.args, remap);
      x.kwargs = copier.copy_args(src.kwargs, remap);
      x.origin = joint_id(fw, id);
      NodeExtra extra = fw.extra(id);
      if (device_meta) extra.original_tensor = src.tensors_begin;
      remap[id] = b.add_node(x, extra);
    } else {
      remap[id] = copier.copy(id, remap);
    }
    for (auto it = after[id].rbegin(); it != after[id].rend(); ++it) {
      Offloaded& o = offs[*it];
      const NodeId x = remap[o.x];
      if (!async) {
        Node put = created(b, o.offload_name, device_put, kDevicePut, o.cpu_tensor);
        put.args = b.begin(ArgKind::kTuple);
        build::node(b, x);
        build::device(b, cpu);
        b.end(put.args);
        put.kwargs = non_blocking_kwargs(b);
        o.made = b.add_node(put);
        continue;
      }
      Node off = created(b, o.offload_name, offload, kAoOffload, o.cpu_tensor);
      off.args = b.begin(ArgKind::kTuple);
      build::node(b, x);
      b.end(off.args);
      off.kwargs = empty(b, ArgKind::kDict);
      const NodeId off_id = b.add_node(off);
      // The keepalive argument holds x until the copy has finished.
      Node w = created(b, o.wait_name, wait, kAoWait, o.cpu_tensor);
      w.args = b.begin(ArgKind::kTuple);
      build::node(b, off_id);
      build::node(b, x);
      b.end(w.args);
      w.kwargs = empty(b, ArgKind::kDict);
      o.made = b.add_node(w);
    }
  }
  return b.finish();
}

// activation_offload_sink_wait_async: waits on an offload go, in order, to
// just before the output.
Graph sink_waits(Graph fw) {
  std::vector<NodeId> order, sunk;
  order.reserve(fw.size());
  for (NodeId id = 0; id < fw.size(); ++id) {
    if (fw.node(id).kind == NodeKind::kOutput) continue;
    const bool sink = calls(fw, id, kAoWait) && !fw.inputs(id).empty() &&
                      calls(fw, fw.inputs(id)[0], kAoOffload);
    (sink ? sunk : order).push_back(id);
  }
  if (sunk.empty()) return fw;
  order.insert(order.end(), sunk.begin(), sunk.end());
  if (fw.output() != kNoNode) order.push_back(fw.output());
  return GraphBuilder::rearrange(fw, order);
}

// --- backward ---------------------------------------------------------------

struct Reloaded {
  NodeId placeholder = kNoNode;  // in the old backward
  NodeId before = kNoNode;       // the first user (old backward)
  std::string placeholder_name, reload_name, wait_name;  // wait_name empty: sync
  uint32_t cpu_tensor = 0;       // the placeholder's new value
  uint32_t original = 0;         // the tensor it stood for
};

// The ops a backward's reloads call: device_put when synchronous, the
// reload and its wait on the offload stream otherwise.
struct ReloadOps {
  OpId device_put = kNoOp, reload = kNoOp, wait = kNoOp;
};

// A synchronous reload of CPU placeholder `p`: device_put(p, device) onto
// the original tensor's device. Returns it.
NodeId add_sync_reload(GraphBuilder& b, const Reloaded& r, NodeId p, const TensorMeta& orig,
                       const ReloadOps& ops, uint32_t gpu) {
  Node put = created(b, r.reload_name, ops.device_put, kDevicePut, gpu);
  put.args = b.begin(ArgKind::kTuple);
  build::node(b, p);
  build::device(b, orig.device);
  b.end(put.args);
  put.kwargs = non_blocking_kwargs(b);
  return b.add_node(put);
}

// An asynchronous reload of CPU placeholder `p`, then the wait that yields
// the GPU tensor. Returns the wait. With `layout` (torch 2.13 on) the reload
// is reload(p, device, sizes, strides), allocating the original layout, and
// the wait keeps p alive: wait_tensor(reload, p); before, reload(p, device)
// and wait_tensor(reload). The GPU value is the original layout either way
// (only contiguous tensors are offloaded, and .to() keeps their strides).
NodeId add_async_reload(GraphBuilder& b, const Graph& bw, const Reloaded& r, NodeId p,
                        const TensorMeta& orig, const ReloadOps& ops, uint32_t gpu, bool layout) {
  Node rl = created(b, r.reload_name, ops.reload, kAoReload, gpu);
  rl.args = b.begin(ArgKind::kTuple);
  build::node(b, p);
  build::device(b, orig.device);
  for (bool sizes : {true, false}) {
    if (!layout) break;
    const ArgId list = b.begin(ArgKind::kList);
    for (const Dim& d : sizes ? bw.shape(orig) : bw.stride(orig)) build::integer(b, d.value);
    b.end(list);
  }
  b.end(rl.args);
  rl.kwargs = empty(b, ArgKind::kDict);
  const NodeId rl_id = b.add_node(rl);
  Node w = created(b, r.wait_name, ops.wait, kAoWait, gpu);
  w.args = b.begin(ArgKind::kTuple);
  build::node(b, rl_id);
  if (layout) build::node(b, p);
  b.end(w.args);
  w.kwargs = empty(b, ArgKind::kDict);
  return b.add_node(w);
}

// The saved value's placeholder, now receiving its CPU copy. Its meta names
// the original tensor's device, and with `layout` (2.13 on) its size and
// stride.
NodeId add_cpu_placeholder(GraphBuilder& b, const Reloaded& r, bool layout) {
  Node p;
  p.name = b.intern(r.placeholder_name);
  p.kind = NodeKind::kPlaceholder;
  p.value = ValueKind::kTensor;
  p.flags = kFlagTensorMeta | kFlagSavedForOffloading;
  p.target = b.intern(r.placeholder_name);
  p.tensors_begin = r.cpu_tensor;
  p.tensors_count = 1;
  p.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  p.args = empty(b, ArgKind::kTuple);
  p.kwargs = empty(b, ArgKind::kDict);
  p.origin = kCreatedNode;
  NodeExtra x;
  x.original_tensor = r.original;
  x.original_layout = layout;
  return b.add_node(p, x);
}

Graph rewrite_backward(const Graph& bw, const std::vector<Reloaded>& rels, bool async,
                       bool layout) {
  const size_t n = bw.size();
  std::vector<int32_t> rel_of(n, -1);
  std::vector<std::vector<size_t>> before(n);
  for (size_t k = 0; k < rels.size(); ++k) {
    rel_of[rels[k].placeholder] = static_cast<int32_t>(k);
    before[rels[k].before].push_back(k);  // in placeholder order, as torch inserts
  }

  GraphBuilder b(bw);
  NodeCopier copier(bw, b);
  ReloadOps ops;
  if (async) {
    ops.reload = op_in(bw, copier, b, kAoReload);
    ops.wait = op_in(bw, copier, b, kAoWait);
  } else {
    ops.device_put = op_in(bw, copier, b, kDevicePut);
  }
  int64_t storage = next_storage(bw);

  std::vector<NodeId> remap(n, kNoNode);
  std::vector<NodeId> new_placeholder(rels.size(), kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    for (size_t k : before[id]) {
      const Reloaded& r = rels[k];
      const TensorMeta& orig = *bw.values().tensors(r.original);
      const uint32_t gpu = tensor_on(b, orig, orig.device, storage++);
      remap[r.placeholder] = async
          ? add_async_reload(b, bw, r, new_placeholder[k], orig, ops, gpu, layout)
          : add_sync_reload(b, r, new_placeholder[k], orig, ops, gpu);
    }
    if (rel_of[id] < 0) {
      remap[id] = copier.copy(id, remap);
      continue;
    }
    new_placeholder[rel_of[id]] = add_cpu_placeholder(b, rels[rel_of[id]], layout);
    // Until its reload exists (just before the first user), uses would read
    // the placeholder itself; a first user always comes after the reload.
    remap[id] = new_placeholder[rel_of[id]];
  }
  return b.finish();
}

// torch's reorder_for_prefetch over the backward's nodes: returns the new
// order. Moves are replayed on a doubly linked list.
std::vector<NodeId> prefetch_order(const Graph& bw, const PartitionOptions& options) {
  const size_t n = bw.size();
  std::vector<NodeId> prev(n), next(n);
  for (NodeId id = 0; id < n; ++id) {
    prev[id] = id == 0 ? kNoNode : id - 1;
    next[id] = id + 1 == n ? kNoNode : id + 1;
  }
  NodeId head = n == 0 ? kNoNode : 0;
  auto unlink = [&](NodeId x) {
    if (prev[x] != kNoNode) next[prev[x]] = next[x];
    else head = next[x];
    if (next[x] != kNoNode) prev[next[x]] = prev[x];
  };
  auto insert_before = [&](NodeId x, NodeId at) {  // FX at.prepend(x)
    if (x == at) return;
    unlink(x);
    prev[x] = prev[at];
    next[x] = at;
    if (prev[at] != kNoNode) next[prev[at]] = x;
    else head = x;
    prev[at] = x;
  };
  auto insert_after = [&](NodeId x, NodeId at) {  // FX at.append(x)
    if (x == at) return;
    unlink(x);
    next[x] = next[at];
    prev[x] = at;
    if (next[at] != kNoNode) prev[next[at]] = x;
    next[at] = x;
  };

  // _estimate_transfer_time_in_ms of each reload, by its CPU input's size.
  auto transfer_ms = [&](NodeId reload) {
    const NodeId src = bw.inputs(reload)[0];
    const double bytes = static_cast<double>(size_of(bw, src, options));
    return bytes / 1073741824.0 * 1000.0 / options.activation_offload_cpu_gpu_bw;
  };
  auto runtime_ms = [&](NodeId id) {
    const NodeId origin = bw.node(id).origin;
    if (origin == kCreatedNode || origin == kNoNode) return 0.0;
    return options.offload_node_runtime(origin);
  };

  struct Entry {
    NodeId reload;
    double remaining;
  };
  std::deque<Entry> queue;
  for (NodeId id = static_cast<NodeId>(n); id-- > 0;) {
    const Node& node = bw.node(id);
    if (node.kind == NodeKind::kOutput) continue;
    if (node.kind == NodeKind::kPlaceholder) {
      while (!queue.empty()) {
        insert_after(queue.front().reload, id);
        queue.pop_front();
      }
      break;
    }
    // A reload with its wait (the reload's first user that is a wait).
    if (calls(bw, id, kAoReload) &&
        std::any_of(bw.users(id).begin(), bw.users(id).end(),
                    [&](NodeId u) { return calls(bw, u, kAoWait); })) {
      queue.push_back({id, transfer_ms(id)});
      continue;
    }
    if (queue.empty()) continue;
    queue.front().remaining -= runtime_ms(id);
    if (queue.front().remaining <= 0) {
      insert_before(queue.front().reload, id);
      queue.pop_front();
    }
  }
  std::vector<NodeId> order;
  order.reserve(n);
  for (NodeId id = head; id != kNoNode; id = next[id]) order.push_back(id);
  return order;
}

// The namespace of a graph FX built by copying `g`'s nodes one by one.
FxNamespace names_of(const Graph& g, const TorchBehavior& torch) {
  FxNamespace ns(g.shared_strings(), torch.fx_name_count_by_base);
  for (const Node& node : g.nodes()) ns.create(node.name);
  return ns;
}

bool some_tangent_used(const Graph& bw) {
  for (NodeId id = 0; id < bw.size(); ++id) {
    if (is_tangent(bw, id) && !bw.users(id).empty()) return true;
  }
  return false;
}

// The forward's offloads, in forward-output order (torch walks the output
// tuple), each named in the forward's namespace.
std::vector<Offloaded> plan_offloads(const Graph& fw, const std::vector<NodeId>& chosen,
                                     const PartitionOptions& options, FxNamespace& names) {
  const bool async = options.activation_offload_separate_stream;
  std::vector<uint8_t> is_chosen(fw.size(), 0);
  for (NodeId x : chosen) is_chosen[x] = 1;
  std::vector<Offloaded> offs;
  for (ArgId item : output_items(fw)) {
    const NodeId x = item_node(fw, item);
    if (x == kNoNode || !is_chosen[x]) continue;
    Offloaded o;
    o.x = x;
    o.anchor = last_effective_user(fw, x, options);
    const std::string name(fw.name(x));
    if (async) {
      o.offload_name = names.create_name(fmt::format("async_{}{}", kCpuOffloadPrefix, name));
      o.wait_name = names.create_name(fmt::format("{}{}", kCpuOffloadPrefix, name));
    } else {
      o.offload_name = names.create_name(fmt::format("{}{}", kCpuOffloadPrefix, name));
    }
    offs.push_back(std::move(o));
  }
  return offs;
}

// The backward placeholders of the offloaded forward outputs: one reload
// each, in output order (torch matches them by name), and per backward node
// its reload's index (-1: none).
struct Matched {
  std::vector<Reloaded> rels;
  std::vector<int32_t> placeholder_rel;
};

Matched match_placeholders(const Graph& new_fw, const Graph& bw, FxNamespace& names) {
  Matched m;
  m.placeholder_rel.assign(bw.size(), -1);
  for (ArgId item : output_items(new_fw)) {
    const NodeId f = item_node(new_fw, item);
    if (f == kNoNode) continue;
    const std::string_view fname = new_fw.name(f);
    if (fname.find(kCpuOffloadPrefix) == std::string_view::npos) continue;
    const std::string wanted = replace_all(fname, kCpuOffloadPrefix, "");
    const NodeId p = bw.find(wanted);
    if (p == kNoNode || bw.node(p).kind != NodeKind::kPlaceholder) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': activation offloading found no backward input named "
                              "'{}' (torch raises KeyError)",
                              fname, wanted));
    }
    if (tensor_value(bw, p) == nullptr) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': the backward input of an offloaded activation has no "
                              "tensor value",
                              bw.name(p)));
    }
    Reloaded r;
    r.placeholder = p;
    r.placeholder_name = names.create_name(fname);
    r.cpu_tensor = new_fw.node(f).tensors_begin;
    r.original = bw.node(p).tensors_begin;
    m.placeholder_rel[p] = static_cast<int32_t>(m.rels.size());
    m.rels.push_back(std::move(r));
  }
  return m;
}

// An async reload passes sizes and strides as ints; symbolic ones cannot be.
void check_static_shape(const Graph& bw, const Reloaded& r) {
  const TensorMeta& orig = *bw.values().tensors(r.original);
  for (const auto dims : {bw.shape(orig), bw.stride(orig)}) {
    for (const Dim& d : dims) {
      if (d.expr != 0) {
        throw Error(ErrorCode::kUnsupported,
                    fmt::format("node '{}': an async reload of a tensor with symbolic sizes "
                                "(torch passes raw SymInts as its size and stride "
                                "arguments; remat's graphs cannot hold those)",
                                r.placeholder_name));
      }
    }
  }
}

// Reloads, in placeholder order, each placed before its placeholder's first
// user and named in the backward's namespace.
std::vector<Reloaded> order_reloads(const Graph& bw, Matched matched, bool async, bool layout,
                                    FxNamespace& names) {
  std::vector<Reloaded> ordered;
  for (NodeId id = 0; id < bw.size(); ++id) {
    if (matched.placeholder_rel[id] < 0) continue;
    Reloaded r = std::move(matched.rels[matched.placeholder_rel[id]]);
    const auto users = bw.users(id);
    if (users.empty() && async) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("Offloaded tensor {} has no users in the backward graph",
                              r.placeholder_name));
    }
    r.before = users.empty() ? bw.output() : *std::min_element(users.begin(), users.end());
    const std::string reload = replace_all(r.placeholder_name, kCpuOffloadPrefix, kGpuReloadPrefix);
    if (async) {
      if (layout) check_static_shape(bw, r);
      r.reload_name = names.create_name("async_" + reload);
      r.wait_name = names.create_name(reload);
    } else {
      r.reload_name = names.create_name(reload);
    }
    ordered.push_back(std::move(r));
  }
  return ordered;
}

// torch 2.11 runs the separate stream as the synchronous rewrite plus
// streams.* bookkeeping whose stream and event ids are indices into
// dynamo's process-wide registry of graph-created objects: they depend on
// every object created before, which a partitioner cannot know.
[[noreturn]] void refuse_stream_registry_ids(const Graph& fw, NodeId first) {
  throw Error(ErrorCode::kUnsupported,
              fmt::format("node '{}': torch 2.11's separate-stream activation offloading "
                          "(activation_offload_separate_stream) numbers its streams and events "
                          "from dynamo's global registry of graph-created objects, which remat "
                          "cannot compute; remat does not reproduce it (torch 2.12 on emits "
                          "ao.offload / ao.reload / ao.wait_tensor, which remat does)",
                          fw.name(first)));
}

}  // namespace

int offload_activations(Extracted& e, int num_fwd_outputs, bool backward_reordered,
                        const PartitionOptions& options) {
  const Graph& fw = e.forward;
  const Graph& bw = e.backward;
  const std::vector<NodeId> chosen = choose(fw, num_fwd_outputs, options);
  if (chosen.empty()) return 0;
  const bool async = options.activation_offload_separate_stream;
  // 2.12 on the separate stream is ao.* ops; 2.11's stream ids are refused.
  if (async && !options.torch.offload_async_ops) refuse_stream_registry_ids(fw, chosen.front());
  // 2.13 on, reloads carry the original layout; before, forward nodes
  // record their device instead.
  const bool layout = options.torch.offload_reload_layout;
  for (NodeId x : chosen) {
    if (tensor_value(fw, x) == nullptr) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': marked should_offload, but its value is not a tensor "
                              "(torch's offloading moves tensors only)",
                              fw.name(x)));
    }
  }
  std::vector<Offloaded> offs = plan_offloads(fw, chosen, options, e.forward_names);
  Graph new_fw = rewrite_forward(fw, offs, async, !layout);

  // Backward: torch matches forward outputs to backward placeholders by name.
  if (backward_reordered && some_tangent_used(bw)) e.backward_names = names_of(bw, options.torch);
  Matched matched = match_placeholders(new_fw, bw, e.backward_names);
  const std::vector<Reloaded> ordered =
      order_reloads(bw, std::move(matched), async, layout, e.backward_names);
  Graph new_bw = rewrite_backward(bw, ordered, async, layout);

  if (async && options.activation_offload_sink_wait) new_fw = sink_waits(std::move(new_fw));
  if (async && options.activation_reload_prefetch) {
    std::vector<NodeId> order = prefetch_order(new_bw, options);
    bool identity = true;
    for (size_t k = 0; identity && k < order.size(); ++k) identity = order[k] == k;
    if (!identity) new_bw = GraphBuilder::rearrange(new_bw, order);
  }
  e.forward = std::move(new_fw);
  e.backward = std::move(new_bw);
  return static_cast<int>(offs.size());
}

}  // namespace remat
