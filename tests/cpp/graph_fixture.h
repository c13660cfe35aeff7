// tests/cpp/graph_fixture.h — a short way to write joint graphs in tests.
//
//   TestGraph t;
//   Ref x = t.placeholder("primals_1", {4, 8});
//   Ref y = t.call("aten.relu.default", {x}, {4, 8});
//   t.output({y});
//   Graph g = t.build();
//
// Nodes are recorded as plain descriptions and only turned into a Graph by
// build(), so a test may adjust any field after creating the node:
// `t[y].recompute = RecomputePolicy::kMustSave`. Node names default to the
// op name ("relu", "relu_1", ...) as FX names them. Every tensor gets its own
// storage unless a test shares one (`t.alias(view, base)`).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "extract/extract.h"
#include "remat/graph.h"
#include "remat/result.h"
#include "remat/ops.h"

namespace remat::testing {

// A node reference, as returned by TestGraph.
struct Ref {
  NodeId id = kNoNode;
};

// One argument value: a node, a constant or a container.
struct A {
  ArgKind kind = ArgKind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;
  NodeId node = kNoNode;
  std::vector<A> items;  // containers; dicts alternate key, value

  A() = default;
  A(std::nullptr_t) {}
  A(Ref r) : kind(ArgKind::kNode), node(r.id) {}
  A(bool b) : kind(ArgKind::kBool), i(b) {}
  A(int v) : kind(ArgKind::kInt), i(v) {}
  A(int64_t v) : kind(ArgKind::kInt), i(v) {}
  A(double v) : kind(ArgKind::kFloat), f(v) {}
  A(const char* v) : kind(ArgKind::kStr), s(v) {}

  static A list(std::vector<A> xs) { return container(ArgKind::kList, std::move(xs)); }
  static A tuple(std::vector<A> xs) { return container(ArgKind::kTuple, std::move(xs)); }
  static A str_like(ArgKind k, std::string v) {  // kDtype, kDevice, kTarget, ...
    A a;
    a.kind = k;
    a.s = std::move(v);
    return a;
  }
  static A opaque(std::string repr, int64_t handle) {
    A a = str_like(ArgKind::kOpaque, std::move(repr));
    a.i = handle;
    return a;
  }
  static A container(ArgKind k, std::vector<A> xs) {
    A a;
    a.kind = k;
    a.items = std::move(xs);
    return a;
  }
};

struct TensorSpec {
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;   // empty: no stride recorded
  std::string device = "cpu";
  std::string dtype = "float32";
  uint16_t itemsize = 4;
  int64_t storage = -1;          // -1: a fresh storage is assigned at creation
  bool symbolic_numel = false;   // numel has no hint: torch's 4096 fallback
  std::vector<std::string> dim_exprs;  // per dim: a symbolic size's expression ("" = constant)
};

struct NodeSpec {
  std::string name;
  NodeKind kind = NodeKind::kCallFunction;
  std::string target;
  std::vector<A> args;
  std::vector<std::pair<std::string, A>> kwargs;
  ValueKind value = ValueKind::kTensor;
  std::vector<TensorSpec> tensors;
  RecomputePolicy recompute = RecomputePolicy::kNone;
  PartitionerTag tag = PartitionerTag::kNone;
  uint16_t flags = kFlagTensorMeta;
  int64_t ac_graph_id = 0;
  double memory_budget = 0;         // with kFlagMemoryBudget
  double region_memory_budget = 0;  // with kFlagRegionBudget
  std::string sym_expr;
  int64_t sym_hint = 0;
  std::string custom_context;  // meta "custom_context" as JSON ("[1,null,null]"); "" = none
};

// Overrides of the op facts default_op_facts guesses from a name.
struct OpSpec {
  std::optional<int16_t> num_returns;
  std::optional<bool> is_mutable;
  std::optional<uint8_t> tags;
  std::optional<uint8_t> packet_tags;
  int16_t dropout_p_index = -1;              // the schema's dropout_p, when it has one
  std::optional<double> dropout_p_default;   // and its default
  std::vector<std::string> mutable_args;  // schema arguments the op writes to
};

class TestGraph {
 public:
  Ref placeholder(const std::string& name, std::vector<int64_t> shape = {4}) {
    NodeSpec n;
    n.name = name;
    n.kind = NodeKind::kPlaceholder;
    n.target = name;
    n.tensors.push_back(tensor(std::move(shape)));
    return add(std::move(n));
  }

  // A call_function producing one tensor of `shape`.
  Ref call(const std::string& target, std::vector<A> args, std::vector<int64_t> shape = {4},
           const std::string& name = "") {
    NodeSpec n = call_spec(target, std::move(args), name);
    n.tensors.push_back(tensor(std::move(shape)));
    return add(std::move(n));
  }

  // A call_function producing a tuple of tensors (native_dropout, ...).
  Ref call_multi(const std::string& target, std::vector<A> args,
                 std::vector<std::vector<int64_t>> shapes, const std::string& name = "") {
    NodeSpec n = call_spec(target, std::move(args), name);
    n.value = ValueKind::kSequence;
    n.flags = 0;  // no "tensor_meta" on multi-output nodes
    for (auto& s : shapes) n.tensors.push_back(tensor(std::move(s)));
    return add(std::move(n));
  }

  // operator.getitem(parent, index), a tensor of `shape`.
  Ref getitem(Ref parent, int index, std::vector<int64_t> shape = {4}) {
    return call("operator.getitem", {parent, index}, std::move(shape), "getitem");
  }

  // A call_function whose value is a SymInt.
  Ref call_sym(const std::string& target, std::vector<A> args, const std::string& expr,
               int64_t hint, const std::string& name = "") {
    NodeSpec n = call_spec(target, std::move(args), name);
    n.value = ValueKind::kSymInt;
    n.flags = 0;
    n.sym_expr = expr;
    n.sym_hint = hint;
    return add(std::move(n));
  }

  Ref get_attr(const std::string& name) {
    NodeSpec n;
    n.name = name;
    n.kind = NodeKind::kGetAttr;
    n.target = name;
    n.value = ValueKind::kMissing;
    n.flags = 0;
    return add(std::move(n));
  }

  // inductor's control_deps(additional_deps, subgraph, *deps): its value
  // is (the subgraph's result, *deps), read through getitem(cd, k >= 1).
  // `stream_sync`: the subgraph synchronizes streams (kFlagStreamSync).
  Ref control_deps(std::vector<A> additional, Ref subgraph, std::vector<Ref> deps,
                   bool stream_sync = true) {
    std::vector<A> args{A::tuple(std::move(additional)), subgraph};
    std::vector<std::vector<int64_t>> shapes;
    for (Ref d : deps) {
      args.push_back(d);
      shapes.push_back(nodes_[d.id].tensors.empty() ? std::vector<int64_t>{4}
                                                    : nodes_[d.id].tensors[0].shape);
    }
    Ref cd = call_multi("higher_order.control_deps", std::move(args), std::move(shapes),
                        "control_deps");
    nodes_[cd.id].flags |= kFlagImpure | (stream_sync ? kFlagStreamSync : 0);
    return cd;
  }

  void output(std::vector<A> values) {
    NodeSpec n;
    n.name = "output";
    n.kind = NodeKind::kOutput;
    n.target = "output";
    n.value = ValueKind::kMissing;
    n.flags = 0;
    n.args = {A::tuple(std::move(values))};
    add(std::move(n));
  }

  NodeSpec& operator[](Ref r) { return nodes_[r.id]; }

  // Activation-checkpoint metadata: meta["recompute"] and, when given,
  // meta["ac_graph_id"].
  void checkpoint(Ref r, RecomputePolicy p, std::optional<int64_t> ac_graph_id = std::nullopt) {
    NodeSpec& n = nodes_[r.id];
    n.recompute = p;
    if (ac_graph_id) {
      n.flags |= kFlagAcGraphId;
      n.ac_graph_id = *ac_graph_id;
    }
  }
  OpSpec& op(const std::string& name) { return ops_[name]; }

  // Makes `view` share the storage of `base`'s first tensor.
  void alias(Ref view, Ref base) { nodes_[view.id].tensors.at(0).storage = nodes_[base.id].tensors.at(0).storage; }

  Graph build() const {
    GraphBuilder b;
    for (const NodeSpec& s : nodes_) {
      Node n;
      NodeExtra x;
      n.name = b.intern(s.name);
      n.kind = s.kind;
      n.value = s.value;
      n.recompute = s.recompute;
      n.tag = s.tag;
      n.flags = s.flags;
      if (s.tag != PartitionerTag::kNone) x.tag_name = b.intern(partitioner_tag_name(s.tag));
      n.target = b.intern(s.target);
      if (s.kind == NodeKind::kCallFunction) n.op = make_op(b, s.target);
      x.ac_graph_id = s.ac_graph_id;
      x.memory_budget = s.memory_budget;
      x.region_memory_budget = s.region_memory_budget;
      if (!s.custom_context.empty()) x.custom_context = b.intern(s.custom_context);
      if (!s.sym_expr.empty()) {
        x.sym_expr = b.intern(s.sym_expr);
        x.sym_hint = s.sym_hint;
        x.has_sym_hint = true;
      }
      n.tensors_begin = static_cast<uint32_t>(b.tensor_count());
      n.tensors_count = static_cast<uint32_t>(s.tensors.size());
      int32_t index = 0;
      for (const TensorSpec& ts : s.tensors) {
        TensorMeta t;
        t.dtype = b.intern(ts.dtype);
        t.itemsize = ts.itemsize;
        t.device = b.intern(ts.device);
        t.shape_begin = static_cast<uint32_t>(b.dim_count());
        t.rank = static_cast<uint32_t>(ts.shape.size());
        int64_t numel = 1;
        for (size_t i = 0; i < ts.shape.size(); ++i) {
          Dim dim;
          dim.value = ts.shape[i];
          if (i < ts.dim_exprs.size() && !ts.dim_exprs[i].empty()) dim.expr = b.intern(ts.dim_exprs[i]);
          b.add_dim(dim);
          numel *= ts.shape[i];
        }
        t.stride_begin = static_cast<uint32_t>(b.dim_count());
        t.has_stride = !ts.stride.empty();
        for (int64_t d : ts.stride) {
          Dim dim;
          dim.value = d;
          b.add_dim(dim);
        }
        t.numel_hint = ts.symbolic_numel ? 4096 : numel;
        t.storage = ts.storage;
        t.index = index++;
        b.add_tensor(t);
      }
      if (s.kind != NodeKind::kPlaceholder && s.kind != NodeKind::kGetAttr) {
        n.args = b.begin(ArgKind::kTuple);
        for (const A& a : s.args) emit(b, a);  // output: (structure,) as in FX
        b.end(n.args);
        if (!s.kwargs.empty()) {
          n.kwargs = b.begin(ArgKind::kDict);
          for (const auto& [k, v] : s.kwargs) {
            emit(b, A(k.c_str()));
            emit(b, v);
          }
          b.end(n.kwargs);
        }
      }
      b.add_node(n, x);
    }
    // Ops given facts but called by no node (an op auto_functionalized
    // wraps, named by an argument) are in the table too, as the exporter
    // writes them.
    for (const auto& [name, spec] : ops_) make_op(b, name);
    return b.finish();
  }

 private:
  TensorSpec tensor(std::vector<int64_t> shape) {
    TensorSpec t;
    t.shape = std::move(shape);
    t.storage = next_storage_++;
    return t;
  }

  NodeSpec call_spec(const std::string& target, std::vector<A> args, const std::string& name) {
    NodeSpec n;
    n.target = target;
    n.args = std::move(args);
    n.name = unique_name(name.empty() ? default_name(target) : name);
    return n;
  }

  // "aten.relu.default" -> "relu", "operator.getitem" -> "getitem".
  static std::string default_name(const std::string& target) {
    size_t first = target.find('.');
    size_t last = target.rfind('.');
    if (first == std::string::npos) return target;
    if (first == last) return target.substr(first + 1);
    return target.substr(first + 1, last - first - 1);
  }

  std::string unique_name(const std::string& base) {
    int& count = name_counts_[base];
    std::string name = count == 0 ? base : base + "_" + std::to_string(count);
    ++count;
    return name;
  }

  Ref add(NodeSpec n) {
    nodes_.push_back(std::move(n));
    return Ref{static_cast<NodeId>(nodes_.size() - 1)};
  }

  OpId make_op(GraphBuilder& b, const std::string& target) const {
    auto it = ops_.find(target);
    if (it == ops_.end()) return b.add_op_by_name(target);
    OpFacts f = default_op_facts(target);
    OpInfo info;
    info.name = b.intern(target);
    info.ns = b.intern(f.ns);
    info.packet = b.intern(f.packet);
    info.kind = f.kind;
    info.is_mutable = it->second.is_mutable.value_or(f.is_mutable);
    info.is_view = f.is_view;
    info.num_returns = it->second.num_returns.value_or(-1);
    info.tags = it->second.tags.value_or(f.tags);
    info.dropout_p_index = it->second.dropout_p_index;
    info.dropout_p_has_default = it->second.dropout_p_default.has_value();
    info.dropout_p_default = it->second.dropout_p_default.value_or(0.0);
    info.packet_tags = it->second.packet_tags.value_or(f.packet_tags);
    return b.add_op(info, it->second.mutable_args);
  }

  static void emit(GraphBuilder& b, const A& a) {
    Arg arg;
    arg.kind = a.kind;
    switch (a.kind) {
      case ArgKind::kList:
      case ArgKind::kTuple:
      case ArgKind::kDict:
      case ArgKind::kSlice: {
        ArgId c = b.begin(a.kind);
        for (const A& x : a.items) emit(b, x);
        b.end(c);
        return;
      }
      case ArgKind::kNode:
        arg.id = a.node;
        break;
      case ArgKind::kStr:
      case ArgKind::kDtype:
      case ArgKind::kDevice:
      case ArgKind::kLayout:
      case ArgKind::kMemoryFormat:
      case ArgKind::kTarget:
      case ArgKind::kOpaque:
        arg.id = b.intern(a.s);
        arg.i = a.i;
        break;
      default:
        arg.i = a.i;
        arg.f = a.f;
        break;
    }
    b.leaf(arg);
  }

  std::vector<NodeSpec> nodes_;
  std::map<std::string, OpSpec> ops_;
  std::map<std::string, int> name_counts_;
  int64_t next_storage_ = 0;
};

// Every node's name, in graph order: the shape most tests compare.
inline std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> out;
  out.reserve(g.size());
  for (NodeId id = 0; id < g.size(); ++id) out.emplace_back(g.name(id));
  return out;
}

// The values of a graph's output node, in order: node names, "None" where a
// position holds no node.
inline std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> out;
  const ArgId values = g.children(g.node(g.output()).args).at(0);
  for (ArgId c : g.children(values)) {
    const Arg& a = g.arg(c);
    out.push_back(a.kind == ArgKind::kNode ? std::string(g.name(a.id)) : "None");
  }
  return out;
}

// One argument, printed as the rewrite tests compare it: a node's name,
// numbers (floats in their shortest form), True/False, "torch.DTYPE",
// "device:D", "target:T", lists as "[a,b]", any other kind by its name.
inline std::string arg_text(const Graph& g, ArgId id) {
  const Arg& a = g.arg(id);
  switch (a.kind) {
    case ArgKind::kNode: return std::string(g.name(a.id));
    case ArgKind::kInt: return std::to_string(a.i);
    case ArgKind::kBool: return a.i ? "True" : "False";
    case ArgKind::kDtype: return "torch." + std::string(g.str(a.id));
    case ArgKind::kDevice: return "device:" + std::string(g.str(a.id));
    case ArgKind::kTarget: return "target:" + std::string(g.str(a.id));
    case ArgKind::kFloat: {
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, a.f);
      return std::string(buf, r.ptr);
    }
    case ArgKind::kList: {
      std::string items;
      for (ArgId c : g.children(id)) items += (items.empty() ? "" : ",") + arg_text(g, c);
      return "[" + items + "]";
    }
    default: return arg_kind_name(a.kind);
  }
}

// A node's positional args, one text per position (arg_text).
inline std::vector<std::string> arg_texts(const Graph& g, NodeId id) {
  std::vector<std::string> out;
  for (ArgId c : g.children(g.node(id).args)) out.push_back(arg_text(g, c));
  return out;
}

// The forward and backward graphs extracted from joint graph `g` with
// `saved` as the saved values, the way the partitioners extract them: the
// setup of the rewrite tests, which then run one rewrite on the result.
inline Extracted extract_saving(const Graph& g, std::vector<NodeId> saved, int num_fwd_outputs = 1) {
  SavedSets sets;
  sets.saved_values = std::move(saved);
  return extract_fwd_bwd(g, sets, num_fwd_outputs, PartitionOptions{});
}

// The names of a partition's saved values, in order.
// The joint graph of a TestGraph whose first `num_fwd_outputs` outputs are
// the forward's.
inline JointGraph joint_of(const TestGraph& t, int num_fwd_outputs = 1) {
  JointGraph j;
  j.graph = t.build();
  j.num_fwd_outputs = num_fwd_outputs;
  return j;
}

inline std::vector<std::string> saved_names(const JointGraph& j, const PartitionResult& r) {
  std::vector<std::string> out;
  for (NodeId id : r.saved_values) out.emplace_back(j.graph.name(id));
  return out;
}

// A whole file as a string; "" when it cannot be read (tests check absence
// with it, so it must not throw as remat::read_file does).
inline std::string slurp(const std::string& path) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s;
}

// Whether `text` contains `part` (messages, documents, command output).
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace remat::testing
