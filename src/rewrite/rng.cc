// rewrite/rng.cc — functionalize_rng_ops: torch 2.13's functionalize_rng_ops,
// which makes a random op recomputed in the backward draw the numbers its
// forward drew, by one of two paths per op.
//
// Contract (rewrite.h). A random op (graph/random_op.h: the nondeterministic_seeded
// tag; from 2.14 on, not attention whose dropout is statically zero) of the
// joint graph whose policy is MUST/PREFER_RECOMPUTE and that appears, by name,
// in both extracted graphs is rewritten; k = 0, 1, ... counts these ops in
// joint-graph order. An op's device is the device of its value's first
// tensor on a graph-safe device type (options.graphsafe_rng_device_types:
// torch's supports_graphsafe_rng), "cpu" when it has none, and none when it
// has no value.
//
// Graph-safe path (torch's apply_graphsafe_rng_functionalization), for an op
// on a graph-safe device when `use_graphsafe` holds and the ops' devices,
// "cpu" aside, are at most one (a value-less op counts as a device of its
// own, as torch's None):
//  * forward: a placeholder `fwd_rng_state_k` after the last placeholder
//    (after the ones this rewrite added before it), whose value is a
//    generator of the op's device; the op is replaced in place by
//    `graphsafe_run_with_rng_state(op, *args, **kwargs, rng_state=<it>)`.
//  * backward: the same with `bwd_rng_state_k`.
//  The device must have an index (torch asserts it).
//
// CPU-style path, for every other op (torch's run_and_save_rng_state):
//  * forward: before it, `run_and_save_rng_state(op, *args, **kwargs)`, then
//    `getitem(·, 0)` (the state: a uint8 tensor shaped like
//    torch.get_rng_state(), or like the device's get_rng_state() for an op
//    on a graph-safe device) and `getitem(·, 1)` (the value, with the op's
//    meta); uses move to the latter and the op goes. The states join the
//    outputs just before the trailing saved sym nodes, in a new output node
//    (FX names it "output_1").
//  * backward: a placeholder `rng_state_output_j` (j counts this path's ops)
//    just before the first placeholder whose name contains "tangent", and
//    the op replaced by `run_with_rng_state(state, op, *args, **kwargs)`.
//
// New nodes are named through the graphs' FxNamespace in the order torch
// creates them, and get origin kCreatedNode. The run_* nodes carry no value
// (torch sets no meta on them).
#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "graph/copy.h"
#include "graph/query.h"
#include "graph/random_op.h"
#include "remat/error.h"
#include "rewrite/node_builder.h"
#include "rewrite/rewrite.h"

namespace remat {
namespace {

constexpr uint32_t kNone32 = std::numeric_limits<uint32_t>::max();
constexpr int64_t kCpuRngStateBytes = 5056;   // torch.get_rng_state().numel()
constexpr int64_t kCudaRngStateBytes = 16;    // seed + offset of a Philox generator

// torch's is_rng_op on a call_function node of any of the three graphs (an
// op copied into the forward or backward keeps its arguments, so the three
// agree).
bool is_seeded_call(const Graph& g, NodeId id, const TorchBehavior& torch) {
  return id != kNoNode && is_rng_op(g, id, torch);
}

bool recompute_requested(const Node& n) {
  return n.recompute == RecomputePolicy::kMustRecompute ||
         n.recompute == RecomputePolicy::kPreferRecompute;
}

bool graphsafe_type(std::string_view device, const std::vector<std::string>& types) {
  return std::find(types.begin(), types.end(), device_type(device)) != types.end();
}

// torch's get_device: "" when the node has no value; the device of its first
// tensor on a graph-safe device type (a tensor, or a tuple's elements);
// "cpu" otherwise.
std::string rng_device(const Graph& g, NodeId id, const std::vector<std::string>& types) {
  const Node& n = g.node(id);
  if (n.value == ValueKind::kMissing) return "";
  if (n.value == ValueKind::kTensor || n.value == ValueKind::kSequence) {
    for (const TensorMeta& t : g.tensors(id)) {
      std::string_view d = g.str(t.device);
      if (graphsafe_type(d, types)) return std::string(d);
    }
  }
  return "cpu";
}

struct Pair {
  NodeId fw = kNoNode;
  NodeId bw = kNoNode;
  bool graphsafe = false;
  std::string device;  // graph-safe path: the generators' device
  int64_t state_bytes = kCpuRngStateBytes;  // CPU-style path: the state's size
  // Names, created as torch creates the nodes. Graph-safe path: fw_input and
  // bw_input are the generator placeholders, fw_run and bw_run the
  // graphsafe_run_with_rng_state calls. CPU-style path: fw_run is
  // run_and_save_rng_state, state and value its getitems, bw_input the state
  // placeholder and bw_run run_with_rng_state.
  std::string fw_input, bw_input, fw_run, bw_run, state, value;
  std::string bw_target;  // CPU-style path: the state placeholder's FX target
};

using build::empty;
using build::op_in;

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

// A node with no meta, made by a rewrite.
Node created(GraphBuilder& b, NodeKind kind, const std::string& name, std::string_view target) {
  Node n;
  n.name = b.intern(name);
  n.kind = kind;
  n.target = b.intern(target);
  n.origin = kCreatedNode;
  n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  n.tensors_begin = static_cast<uint32_t>(b.tensor_count());
  return n;
}

Node created_call(GraphBuilder& b, const std::string& name, OpId op, std::string_view target) {
  Node n = created(b, NodeKind::kCallFunction, name, target);
  n.op = op;
  return n;
}

// A placeholder `name` (its FX target too) whose value is a fresh generator
// of `device` (torch: get_default_generator(device).clone_state()).
NodeId add_generator_placeholder(GraphBuilder& b, const std::string& name,
                                 const std::string& target, const std::string& device) {
  Node ph = created(b, NodeKind::kPlaceholder, name, target);
  ph.value = ValueKind::kGenerator;
  ph.args = empty(b, ArgKind::kTuple);
  ph.kwargs = empty(b, ArgKind::kDict);
  NodeExtra x;
  x.device = b.intern(device);
  return b.add_node(ph, x);
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

// The kwargs of `id` with "rng_state" set to `state` (added last, or
// replacing an existing entry in place, as a dict update does).
ArgId kwargs_with_state(const Graph& src, NodeCopier& copier, GraphBuilder& b, NodeId id,
                        const std::vector<NodeId>& remap, NodeId state) {
  const ArgId dict = b.begin(ArgKind::kDict);
  bool replaced = false;
  const ArgId root = src.node(id).kwargs;
  if (root != kNoArg) {
    const std::vector<ArgId> items = src.children(root);
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      copier.copy_args(items[i], remap);
      const Arg& key = src.arg(items[i]);
      if (key.kind == ArgKind::kStr && src.str(key.id) == "rng_state") {
        build::node(b, state);
        replaced = true;
      } else {
        copier.copy_args(items[i + 1], remap);
      }
    }
  }
  if (!replaced) {
    build::str(b, "rng_state");
    build::node(b, state);
  }
  b.end(dict);
  return dict;
}

// The argument tuple `(op, *args)` of a run_* node wrapping random op `id`.
ArgId op_then_positional(const Graph& src, NodeCopier& copier, GraphBuilder& b, NodeId id,
                         const std::vector<NodeId>& remap) {
  const ArgId args = b.begin(ArgKind::kTuple);
  Arg target;
  target.kind = ArgKind::kTarget;
  target.id = copier.str(src.node(id).target);
  b.leaf(target);
  copy_positional(src, copier, id, remap);
  b.end(args);
  return args;
}

// `graphsafe_run_with_rng_state(op, *args, **kwargs, rng_state=state)`.
NodeId add_graphsafe_run(const Graph& src, NodeCopier& copier, GraphBuilder& b, OpId run,
                         NodeId id, const std::string& name, const std::vector<NodeId>& remap,
                         NodeId state) {
  Node n = created_call(b, name, run, "higher_order.graphsafe_run_with_rng_state");
  n.args = op_then_positional(src, copier, b, id, remap);
  n.kwargs = kwargs_with_state(src, copier, b, id, remap, state);
  return b.add_node(n);
}

int64_t next_storage(const Graph& g) {
  int64_t m = -1;
  for (NodeId id = 0; id < g.size(); ++id) {
    for (const TensorMeta& t : g.tensors(id)) m = std::max(m, t.storage);
  }
  return m + 1;
}

NodeId last_placeholder(const Graph& g, const char* which) {
  NodeId last = kNoNode;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind == NodeKind::kPlaceholder) last = id;
  }
  if (last == kNoNode) {
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("functionalize_rng_ops: the {} has no placeholder", which));
  }
  return last;
}

// The forward: graph-safe generator inputs after its last placeholder,
// each random op replaced in place, CPU-style states before the trailing
// sym outputs. `output_name` is empty when no state is added.
// The ops the forward's rewrite calls.
struct RngOps {
  OpId run_and_save = kNoOp, graphsafe_run = kNoOp, getitem = kNoOp;
};

// The forward's side of an eager pair: run_and_save_rng_state(target,
// *args, **kwargs) in place of node `id`, then getitem 0 (the state, a
// new tensor of `state_storage`) and getitem 1 (the value, with the op's
// meta). Returns the state's and the value's nodes.
struct RunAndSave {
  NodeId state = kNoNode, value = kNoNode;
};

RunAndSave add_run_and_save(const Graph& fw, NodeCopier& copier, GraphBuilder& b, const RngOps& ops,
                            NodeId id, const Pair& p, const std::vector<NodeId>& remap,
                            int64_t state_storage) {
  Node rs = created_call(b, p.fw_run, ops.run_and_save, "higher_order.run_and_save_rng_state");
  rs.args = op_then_positional(fw, copier, b, id, remap);
  rs.kwargs = copy_kwargs(fw, copier, b, id, remap);
  const NodeId rs_id = b.add_node(rs);

  RunAndSave out;
  for (int index = 0; index < 2; ++index) {
    Node gi = created_call(b, index == 0 ? p.state : p.value, ops.getitem, "operator.getitem");
    if (index == 0) {
      set_rng_state_value(b, gi, p.state_bytes, state_storage);
    } else {
      copier.copy_value(id, gi);  // the op's meta, under the new name
      gi.name = b.intern(p.value);
      gi.kind = NodeKind::kCallFunction;
      gi.target = b.intern("operator.getitem");
      gi.op = ops.getitem;
      gi.origin = kCreatedNode;
    }
    gi.args = b.begin(ArgKind::kTuple);
    build::node(b, rs_id);
    build::integer(b, index);
    b.end(gi.args);
    gi.kwargs = empty(b, ArgKind::kDict);
    (index == 0 ? out.state : out.value) = b.add_node(gi);
  }
  return out;
}

// The forward's new output node `output_name` in place of node `id`: the
// RNG states go before the trailing `num_sym_nodes` sym nodes.
void add_output_with_states(const Graph& fw, NodeCopier& copier, GraphBuilder& b, NodeId id,
                            const std::string& output_name, size_t num_sym_nodes,
                            const std::vector<NodeId>& states, const std::vector<NodeId>& remap) {
  const Node& src = fw.node(id);
  Node out;
  copier.copy_value(id, out);
  out.name = b.intern(output_name);
  out.origin = joint_id(fw, id);
  std::vector<ArgId> items;
  if (src.args != kNoArg) {
    std::vector<ArgId> top = fw.children(src.args);
    if (!top.empty()) items = fw.children(top[0]);
  }
  const size_t split = items.size() >= num_sym_nodes ? items.size() - num_sym_nodes : 0;
  out.args = b.begin(ArgKind::kTuple);
  const ArgId values = b.begin(ArgKind::kTuple);
  for (size_t k = 0; k < split; ++k) copier.copy_args(items[k], remap);
  for (NodeId s : states) build::node(b, s);
  for (size_t k = split; k < items.size(); ++k) copier.copy_args(items[k], remap);
  b.end(values);
  b.end(out.args);
  out.kwargs = empty(b, ArgKind::kDict);
  b.add_node(out);
}

Graph rewrite_forward(const Graph& fw, const std::vector<Pair>& pairs, size_t num_sym_nodes,
                      const std::string& output_name) {
  const size_t n = fw.size();
  std::vector<uint32_t> pair_of(n, kNone32);
  for (size_t k = 0; k < pairs.size(); ++k) pair_of[pairs[k].fw] = static_cast<uint32_t>(k);
  const NodeId last_input = last_placeholder(fw, "forward");
  int64_t storage = next_storage(fw);

  GraphBuilder b(fw);
  NodeCopier copier(fw, b);
  std::vector<NodeId> remap(n, kNoNode);
  std::vector<NodeId> generators(pairs.size(), kNoNode);
  std::vector<NodeId> states;
  RngOps ops;
  for (const Pair& p : pairs) {
    if (p.graphsafe && ops.graphsafe_run == kNoOp) {
      ops.graphsafe_run = op_in(fw, copier, b, "higher_order.graphsafe_run_with_rng_state");
    }
    if (!p.graphsafe && ops.run_and_save == kNoOp) {
      ops.run_and_save = op_in(fw, copier, b, "higher_order.run_and_save_rng_state");
      ops.getitem = op_in(fw, copier, b, "operator.getitem");
    }
  }
  for (NodeId id = 0; id < n; ++id) {
    if (pair_of[id] != kNone32) {
      const Pair& p = pairs[pair_of[id]];
      if (p.graphsafe) {
        remap[id] = add_graphsafe_run(fw, copier, b, ops.graphsafe_run, id, p.fw_run, remap,
                                      generators[pair_of[id]]);
      } else {
        const RunAndSave made = add_run_and_save(fw, copier, b, ops, id, p, remap, storage++);
        states.push_back(made.state);
        remap[id] = made.value;
      }
      continue;
    }
    if (fw.node(id).kind == NodeKind::kOutput && !output_name.empty()) {
      add_output_with_states(fw, copier, b, id, output_name, num_sym_nodes, states, remap);
      continue;
    }
    remap[id] = copier.copy(id, remap);
    if (id != last_input) continue;
    for (size_t k = 0; k < pairs.size(); ++k) {
      if (!pairs[k].graphsafe) continue;
      generators[k] = add_generator_placeholder(b, pairs[k].fw_input,
                                                fmt::format("fwd_rng_state_{}", k), pairs[k].device);
    }
  }
  return b.finish();
}

// The backward: CPU-style state inputs before the first tangent, graph-safe
// generator inputs after the last placeholder, each random op replaced in
// place.
Graph rewrite_backward(const Graph& bw, const std::vector<Pair>& pairs, NodeId tangent_start) {
  const size_t n = bw.size();
  std::vector<uint32_t> pair_of(n, kNone32);
  for (size_t k = 0; k < pairs.size(); ++k) pair_of[pairs[k].bw] = static_cast<uint32_t>(k);
  const NodeId last_input = last_placeholder(bw, "backward");
  int64_t storage = next_storage(bw);

  GraphBuilder b(bw);
  NodeCopier copier(bw, b);
  OpId run_with = kNoOp, graphsafe_run = kNoOp;
  for (const Pair& p : pairs) {
    if (p.graphsafe && graphsafe_run == kNoOp) {
      graphsafe_run = op_in(bw, copier, b, "higher_order.graphsafe_run_with_rng_state");
    }
    if (!p.graphsafe && run_with == kNoOp) {
      run_with = op_in(bw, copier, b, "higher_order.run_with_rng_state");
    }
  }
  std::vector<NodeId> remap(n, kNoNode);
  std::vector<NodeId> inputs(pairs.size(), kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    if (id == tangent_start) {
      for (size_t k = 0; k < pairs.size(); ++k) {
        if (pairs[k].graphsafe) continue;
        Node ph = created(b, NodeKind::kPlaceholder, pairs[k].bw_input, pairs[k].bw_target);
        set_rng_state_value(b, ph, pairs[k].state_bytes, storage++);
        ph.args = empty(b, ArgKind::kTuple);
        ph.kwargs = empty(b, ArgKind::kDict);
        inputs[k] = b.add_node(ph);
      }
    }
    if (pair_of[id] == kNone32) {
      remap[id] = copier.copy(id, remap);
      if (id == last_input) {
        for (size_t k = 0; k < pairs.size(); ++k) {
          if (!pairs[k].graphsafe) continue;
          inputs[k] = add_generator_placeholder(b, pairs[k].bw_input,
                                                fmt::format("bwd_rng_state_{}", k),
                                                pairs[k].device);
        }
      }
      continue;
    }
    const uint32_t k = pair_of[id];
    if (pairs[k].graphsafe) {
      remap[id] = add_graphsafe_run(bw, copier, b, graphsafe_run, id, pairs[k].bw_run, remap,
                                    inputs[k]);
      continue;
    }
    Node rw = created_call(b, pairs[k].bw_run, run_with, "higher_order.run_with_rng_state");
    rw.args = b.begin(ArgKind::kTuple);
    build::node(b, inputs[k]);
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

// The state a CPU-style replay saves for an op on `device`: torch's
// get_sample_rng_state, which asks the device's module for its state and
// uses the CPU's when the module has none (torch.cpu has none, so a CPU
// registered as graph-safe still saves the CPU's state).
int64_t state_bytes(const std::string& device, const std::vector<std::string>& types,
                    std::string_view op_name) {
  if (device.empty() || !graphsafe_type(device, types)) return kCpuRngStateBytes;
  if (device_type(device) == "cuda") return kCudaRngStateBytes;
  if (device_type(device) == "cpu") return kCpuRngStateBytes;
  throw Error(ErrorCode::kUnsupported,
              fmt::format("node '{}': the RNG state of a '{}' random op replayed without "
                          "graph-safe functionalization has a size remat does not know",
                          op_name, device_type(device)));
}

}  // namespace

int functionalize_rng_ops(const Graph& joint, Extracted& e, bool use_graphsafe,
                          const std::vector<std::string>& graphsafe_device_types,
                          const TorchBehavior& torch) {
  const Graph& fw = e.forward;
  const Graph& bw = e.backward;
  const std::vector<std::string>& types = graphsafe_device_types;

  // Step 1: the random ops to replay, in joint order.
  std::vector<Pair> pairs;
  for (NodeId id = 0; id < joint.size(); ++id) {
    if (!recompute_requested(joint.node(id)) || !is_seeded_call(joint, id, torch)) continue;
    const NodeId f = fw.find(joint.name(id));
    const NodeId w = bw.find(joint.name(id));
    if (!is_seeded_call(fw, f, torch) || !is_seeded_call(bw, w, torch)) continue;
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

  // Devices: ops on several graph-safe devices (a value-less op counts as
  // one of its own) take the CPU-style path, as in torch.
  std::vector<std::string> devices;
  for (Pair& p : pairs) {
    p.device = rng_device(fw, p.fw, types);
    if (p.device != "cpu" && std::find(devices.begin(), devices.end(), p.device) == devices.end()) {
      devices.push_back(p.device);
    }
  }
  const bool graphsafe = use_graphsafe && devices.size() <= 1;

  int num_states = 0;
  for (size_t k = 0; k < pairs.size(); ++k) {
    Pair& p = pairs[k];
    p.graphsafe = graphsafe && !p.device.empty() && graphsafe_type(p.device, types);
    if (p.graphsafe) {
      if (p.device.find(':') == std::string::npos) {
        throw Error(ErrorCode::kInvalidGraph,
                    fmt::format("node '{}': graph-safe RNG functionalization needs a device "
                                "index, and '{}' has none",
                                fw.name(p.fw), p.device));
      }
      p.fw_input = e.forward_names.create_name(fmt::format("fwd_rng_state_{}", k));
      p.bw_input = e.backward_names.create_name(fmt::format("bwd_rng_state_{}", k));
      p.fw_run = e.forward_names.create_name("graphsafe_run_with_rng_state");
      p.bw_run = e.backward_names.create_name("graphsafe_run_with_rng_state");
      continue;
    }
    p.state_bytes = state_bytes(p.device, types, fw.name(p.fw));
    p.fw_run = e.forward_names.create_name("run_and_save_rng_state");
    p.state = e.forward_names.create_name("getitem");
    p.value = e.forward_names.create_name("getitem");
    p.bw_target = fmt::format("rng_state_output_{}", num_states++);
    p.bw_input = e.backward_names.create_name(p.bw_target);
    p.bw_run = e.backward_names.create_name("run_with_rng_state");
  }
  if (pairs.empty()) return 0;

  const std::string output_name(num_states > 0 ? e.forward_names.create_name("output") : "");
  Graph new_fw = rewrite_forward(fw, pairs, e.saved_sym_nodes.size(), output_name);
  Graph new_bw = rewrite_backward(bw, pairs, tangent_start);
  e.forward = std::move(new_fw);
  e.backward = std::move(new_bw);
  return num_states;
}

}  // namespace remat
