// rewrite/rng.cc — functionalize_rng_ops: torch 2.13's functionalize_rng_ops,
// the path that threads CPU-style RNG states from forward to backward.
//
// Contract (rewrite.h). A random op (nondeterministic_seeded tag) of the
// joint graph whose policy is MUST/PREFER_RECOMPUTE and that appears, by name,
// in both extracted graphs is rewritten, in joint-graph order (k = 0, 1, ...):
//  * forward: before it, `run_and_save_rng_state(op, *args, **kwargs)`, then
//    `getitem(·, 0)` (the state: a uint8 tensor shaped like
//    torch.get_rng_state(), or like torch.cuda.get_rng_state() for a CUDA op)
//    and `getitem(·, 1)` (the value, with the op's meta); uses move to the
//    latter and the op goes. The states join the outputs just before the
//    trailing saved sym nodes, in a new output node (FX names it "output_1").
//  * backward: a placeholder `rng_state_output_k` just before the first
//    placeholder whose name contains "tangent", and the op replaced by
//    `run_with_rng_state(state, op, *args, **kwargs)`.
// New nodes are named through the graphs' FxNamespace in the order torch
// creates them, and get origin kCreatedNode. The run_* nodes carry no value
// (torch sets no meta on them).
//
// Graph-safe functionalization (graphsafe_run_with_rng_state with generator
// placeholders) is what torch uses for CUDA ops when the option is on and a
// single CUDA device is involved; remat does not reproduce it and says so
// with Error(kUnsupported) instead of returning different graphs. CPU ops
// (and ops with no value) always take the path above, as in torch.
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "graph/copy.h"
#include "remat/error.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

constexpr uint32_t kNone32 = std::numeric_limits<uint32_t>::max();
constexpr int64_t kCpuRngStateBytes = 5056;   // torch.get_rng_state().numel()
constexpr int64_t kCudaRngStateBytes = 16;    // seed + offset of a Philox generator

bool is_seeded_call(const Graph& g, NodeId id) {
  if (id == kNoNode || g.node(id).kind != NodeKind::kCallFunction) return false;
  const OpInfo* op = g.op(id);
  return op != nullptr && (op->tags & kTagNondeterministicSeeded) != 0;
}

bool recompute_requested(const Node& n) {
  return n.recompute == RecomputePolicy::kMustRecompute ||
         n.recompute == RecomputePolicy::kPreferRecompute;
}

// get_device: "" when the node has no value; the CUDA device of its first
// CUDA tensor (a tensor, or a tuple's elements); "cpu" otherwise.
std::string rng_device(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.value == ValueKind::kMissing) return "";
  if (n.value == ValueKind::kTensor || n.value == ValueKind::kSequence) {
    for (const TensorMeta& t : g.tensors(id)) {
      std::string_view d = g.str(t.device);
      if (d.substr(0, d.find(':')) == "cuda") return std::string(d);
    }
  }
  return "cpu";
}

struct Pair {
  NodeId fw = kNoNode;
  NodeId bw = kNoNode;
  int64_t state_bytes = kCpuRngStateBytes;
  // Names, created as torch creates the nodes.
  std::string run_and_save, state, value, placeholder, run_with;
};

// An op usable in `b`: the source graph's own facts when it has the op,
// the registry's defaults otherwise.
OpId op_in(const Graph& src, NodeCopier& copier, GraphBuilder& b, std::string_view name) {
  const OpId o = src.find_op(name);
  return o != kNoOp ? copier.op(o) : b.add_op_by_name(name);
}

ArgId empty(GraphBuilder& b, ArgKind kind) {
  const ArgId a = b.begin(kind);
  b.end(a);
  return a;
}

// Sets `n` to a fresh uint8 CPU tensor of `bytes` elements (a fake RNG state).
void set_rng_state_value(GraphBuilder& b, Node& n, int64_t bytes, int64_t storage) {
  TensorMeta t;
  t.dtype = b.intern("uint8");
  t.itemsize = 1;
  t.device = b.intern("cpu");
  Dim size;
  size.value = bytes;
  t.shape_begin = b.add_dim(size);
  t.rank = 1;
  Dim stride;
  stride.value = 1;
  t.stride_begin = b.add_dim(stride);
  t.has_stride = true;
  t.numel_hint = bytes;
  t.storage = storage;
  n.value = ValueKind::kTensor;
  n.tensors_begin = b.add_tensor(t);
  n.tensors_count = 1;
  n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  n.symbols_count = 0;
}

// A call_function node with no meta, made by a rewrite.
Node created_call(GraphBuilder& b, const std::string& name, OpId op, std::string_view target) {
  Node n;
  n.name = b.intern(name);
  n.kind = NodeKind::kCallFunction;
  n.target = b.intern(target);
  n.op = op;
  n.origin = kCreatedNode;
  n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  n.tensors_begin = static_cast<uint32_t>(b.tensor_count());
  return n;
}

// Copies the items of `src`'s positional args after the ones already open
// in `b` (the `*node.args` of a wrapper call).
void copy_positional(const Graph& src, NodeCopier& copier, NodeId id,
                     const std::vector<NodeId>& remap) {
  const ArgId root = src.node(id).args;
  if (root == kNoArg) return;
  for (ArgId c : src.children(root)) copier.copy_args(c, remap);
}

ArgId copy_kwargs(const Graph& src, NodeCopier& copier, GraphBuilder& b, NodeId id,
                  const std::vector<NodeId>& remap) {
  const ArgId root = src.node(id).kwargs;
  return root == kNoArg ? empty(b, ArgKind::kDict) : copier.copy_args(root, remap);
}

ArgId leaf_node(GraphBuilder& b, NodeId id) {
  Arg a;
  a.kind = ArgKind::kNode;
  a.id = id;
  return b.leaf(a);
}

int64_t next_storage(const Graph& g) {
  int64_t m = -1;
  for (NodeId id = 0; id < g.size(); ++id) {
    for (const TensorMeta& t : g.tensors(id)) m = std::max(m, t.storage);
  }
  return m + 1;
}

Graph rewrite_forward(const Graph& fw, const std::vector<Pair>& pairs, size_t num_sym_nodes,
                      const std::string& output_name) {
  const size_t n = fw.size();
  std::vector<uint32_t> pair_of(n, kNone32);
  for (size_t k = 0; k < pairs.size(); ++k) pair_of[pairs[k].fw] = static_cast<uint32_t>(k);
  int64_t storage = next_storage(fw);

  GraphBuilder b(fw);
  NodeCopier copier(fw, b);
  const OpId run_and_save = op_in(fw, copier, b, "higher_order.run_and_save_rng_state");
  const OpId getitem = op_in(fw, copier, b, "operator.getitem");
  std::vector<NodeId> remap(n, kNoNode);
  std::vector<NodeId> states;
  for (NodeId id = 0; id < n; ++id) {
    const Node& src = fw.node(id);
    if (pair_of[id] != kNone32) {
      const Pair& p = pairs[pair_of[id]];
      Node rs = created_call(b, p.run_and_save, run_and_save, "higher_order.run_and_save_rng_state");
      rs.args = b.begin(ArgKind::kTuple);
      Arg target;
      target.kind = ArgKind::kTarget;
      target.id = copier.str(src.target);
      b.leaf(target);
      copy_positional(fw, copier, id, remap);
      b.end(rs.args);
      rs.kwargs = copy_kwargs(fw, copier, b, id, remap);
      const NodeId rs_id = b.add_node(rs);

      for (int index = 0; index < 2; ++index) {
        Node gi = created_call(b, index == 0 ? p.state : p.value, getitem, "operator.getitem");
        if (index == 0) {
          set_rng_state_value(b, gi, p.state_bytes, storage++);
        } else {
          copier.copy_value(id, gi);  // the op's meta, under the new name
          gi.name = b.intern(p.value);
          gi.kind = NodeKind::kCallFunction;
          gi.target = b.intern("operator.getitem");
          gi.op = getitem;
          gi.origin = kCreatedNode;
        }
        gi.args = b.begin(ArgKind::kTuple);
        leaf_node(b, rs_id);
        Arg i;
        i.kind = ArgKind::kInt;
        i.i = index;
        b.leaf(i);
        b.end(gi.args);
        gi.kwargs = empty(b, ArgKind::kDict);
        const NodeId made = b.add_node(gi);
        if (index == 0) states.push_back(made);
        else remap[id] = made;
      }
      continue;
    }
    if (src.kind != NodeKind::kOutput) {
      remap[id] = copier.copy(id, remap);
      continue;
    }
    // The new output: the states go before the trailing sym nodes.
    Node out;
    copier.copy_value(id, out);
    out.name = b.intern(output_name);
    out.origin = src.origin != kNoNode ? src.origin : id;
    std::vector<ArgId> items;
    if (src.args != kNoArg) {
      std::vector<ArgId> top = fw.children(src.args);
      if (!top.empty()) items = fw.children(top[0]);
    }
    const size_t split = items.size() >= num_sym_nodes ? items.size() - num_sym_nodes : 0;
    out.args = b.begin(ArgKind::kTuple);
    const ArgId values = b.begin(ArgKind::kTuple);
    for (size_t k = 0; k < split; ++k) copier.copy_args(items[k], remap);
    for (NodeId s : states) leaf_node(b, s);
    for (size_t k = split; k < items.size(); ++k) copier.copy_args(items[k], remap);
    b.end(values);
    b.end(out.args);
    out.kwargs = empty(b, ArgKind::kDict);
    b.add_node(out);
  }
  return b.finish();
}

Graph rewrite_backward(const Graph& bw, const std::vector<Pair>& pairs, NodeId tangent_start) {
  const size_t n = bw.size();
  std::vector<uint32_t> pair_of(n, kNone32);
  for (size_t k = 0; k < pairs.size(); ++k) pair_of[pairs[k].bw] = static_cast<uint32_t>(k);
  int64_t storage = next_storage(bw);

  GraphBuilder b(bw);
  NodeCopier copier(bw, b);
  const OpId run_with = op_in(bw, copier, b, "higher_order.run_with_rng_state");
  std::vector<NodeId> remap(n, kNoNode);
  std::vector<NodeId> state_inputs(pairs.size(), kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    if (id == tangent_start) {
      for (size_t k = 0; k < pairs.size(); ++k) {
        Node ph;
        ph.name = b.intern(pairs[k].placeholder);
        ph.kind = NodeKind::kPlaceholder;
        ph.target = b.intern(fmt::format("rng_state_output_{}", k));
        ph.origin = kCreatedNode;
        set_rng_state_value(b, ph, pairs[k].state_bytes, storage++);
        ph.args = empty(b, ArgKind::kTuple);
        ph.kwargs = empty(b, ArgKind::kDict);
        state_inputs[k] = b.add_node(ph);
      }
    }
    if (pair_of[id] == kNone32) {
      remap[id] = copier.copy(id, remap);
      continue;
    }
    const uint32_t k = pair_of[id];
    Node rw = created_call(b, pairs[k].run_with, run_with, "higher_order.run_with_rng_state");
    rw.args = b.begin(ArgKind::kTuple);
    leaf_node(b, state_inputs[k]);
    Arg target;
    target.kind = ArgKind::kTarget;
    target.id = copier.str(bw.node(id).target);
    b.leaf(target);
    copy_positional(bw, copier, id, remap);
    b.end(rw.args);
    rw.kwargs = copy_kwargs(bw, copier, b, id, remap);
    remap[id] = b.add_node(rw);
  }
  return b.finish();
}

}  // namespace

int functionalize_rng_ops(const Graph& joint, Extracted& e, bool use_graphsafe) {
  const Graph& fw = e.forward;
  const Graph& bw = e.backward;

  // Step 1: the random ops to replay, in joint order.
  std::vector<Pair> pairs;
  for (NodeId id = 0; id < joint.size(); ++id) {
    if (!recompute_requested(joint.node(id)) || !is_seeded_call(joint, id)) continue;
    const NodeId f = fw.find(joint.name(id));
    const NodeId w = bw.find(joint.name(id));
    if (!is_seeded_call(fw, f) || !is_seeded_call(bw, w)) continue;
    Pair p;
    p.fw = f;
    p.bw = w;
    pairs.push_back(std::move(p));
  }

  NodeId tangent_start = kNoNode;
  for (NodeId id = 0; id < bw.size(); ++id) {
    if (bw.node(id).kind == NodeKind::kPlaceholder &&
        bw.name(id).find("tangent") != std::string_view::npos) {
      tangent_start = id;
      break;
    }
  }
  if (tangent_start == kNoNode) {
    throw Error(ErrorCode::kInvalidGraph,
                "functionalize_rng_ops: the backward has no tangent placeholder");
  }

  // Devices: torch falls back to this path when several CUDA devices (or
  // value-less ops next to CUDA ones) are involved.
  std::vector<std::string> devices;
  for (Pair& p : pairs) {
    std::string d = rng_device(fw, p.fw);
    if (d != "cpu" && std::find(devices.begin(), devices.end(), d) == devices.end()) {
      devices.push_back(d);
    }
  }
  const bool graphsafe = use_graphsafe && devices.size() <= 1;

  for (size_t k = 0; k < pairs.size(); ++k) {
    Pair& p = pairs[k];
    const std::string device = rng_device(fw, p.fw);
    const bool cuda = !device.empty() && device != "cpu";
    if (cuda && graphsafe) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("node '{}': graph-safe RNG functionalization of a CUDA random op "
                              "is not supported (turn graphsafe_rng_functionalization off)",
                              fw.name(p.fw)));
    }
    p.state_bytes = cuda ? kCudaRngStateBytes : kCpuRngStateBytes;
    p.run_and_save = e.forward_names.create_name("run_and_save_rng_state");
    p.state = e.forward_names.create_name("getitem");
    p.value = e.forward_names.create_name("getitem");
    p.placeholder = e.backward_names.create_name(fmt::format("rng_state_output_{}", k));
    p.run_with = e.backward_names.create_name("run_with_rng_state");
  }
  if (pairs.empty()) return 0;

  const std::string output_name(e.forward_names.create_name("output"));
  Graph new_fw = rewrite_forward(fw, pairs, e.saved_sym_nodes.size(), output_name);
  Graph new_bw = rewrite_backward(bw, pairs, tangent_start);
  e.forward = std::move(new_fw);
  e.backward = std::move(new_bw);
  return static_cast<int>(pairs.size());
}

}  // namespace remat
