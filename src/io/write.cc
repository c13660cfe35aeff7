// io/write.cc — writes joint graphs and partition results as JSON format v1.
//
// Contract: the output is a pure function of the input (no addresses, no
// hash-map order; a result's timings only when asked for): top-level fields in the order docs/format.md lists them,
// ops in OpId order, nodes in graph order, one op or node per line. Fields
// equal to their documented default are left out (an empty "args", a
// derivable "numel_hint", a known dtype's "itemsize", ...), so that reading a
// written document and writing it again gives the same bytes. The writer is
// streaming (io/json_writer.h): memory is the output string and nothing else.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>

#include <fmt/format.h>

#include "graph/dtypes.h"
#include "io/json_writer.h"
#include "io/write_trace.h"
#include "io/memory_json.h"
#include "remat/error.h"
#include "remat/io.h"
#include "remat/ops.h"

namespace remat {

namespace {

using io::JsonWriter;

constexpr int64_t kUnhintedNumel = 4096;

// The numel_hint a reader derives from the shape; written only when different.
int64_t default_numel(const Graph& g, const TensorMeta& t) {
  bool all_hinted = true;
  int64_t product = 1;
  for (const Dim& d : g.shape(t)) {
    if (d.has_hint && d.value == 0) return 0;
    all_hinted &= d.has_hint;
  }
  if (!all_hinted) return kUnhintedNumel;
  for (const Dim& d : g.shape(t)) {
    if (__builtin_mul_overflow(product, d.value, &product)) return -1;
  }
  return product;
}

void write_float_arg(JsonWriter& w, double f) {
  if (std::isfinite(f)) {
    w.number(f);
    return;
  }
  w.begin_object();
  w.key("float");
  w.string(std::isnan(f) ? "nan" : (f > 0 ? "inf" : "-inf"));
  // A NaN other than Python's float("nan") keeps its sign and payload.
  constexpr uint64_t kPythonNan = 0x7ff8000000000000ull;
  if (std::isnan(f) && std::bit_cast<uint64_t>(f) != kPythonNan) {
    w.key("bits");
    w.string(fmt::format("{:016x}", std::bit_cast<uint64_t>(f)));
  }
  w.end_object();
}

class GraphWriter {
 public:
  // `origins`: the graph that node origins refer to (result graphs), or null.
  GraphWriter(const Graph& g, JsonWriter& w, const Graph* origins)
      : g_(g), w_(w), origins_(origins) {}

  void nodes(int indent) {
    w_.begin_array();
    for (NodeId id = 0; id < g_.size(); ++id) {
      w_.newline(indent + 2);
      node(id);
    }
    if (g_.size() != 0) w_.break_line(indent);
    w_.end_array();
  }

 private:
  std::string_view str(StrId s) const { return g_.str(s); }

  void node(NodeId id) {
    const Node& n = g_.node(id);
    w_.begin_object();
    w_.key("name");
    w_.string(str(n.name));
    w_.key("op");
    w_.string(node_kind_name(n.kind));
    w_.key("target");
    w_.string(str(n.target));
    if (n.args != kNoArg && g_.arg(n.args).span > 1) {
      w_.key("args");
      container(n.args);
    }
    if (n.kwargs != kNoArg && g_.arg(n.kwargs).span > 1) {
      w_.key("kwargs");
      container(n.kwargs);
    }
    if (n.value != ValueKind::kMissing) {
      w_.key("val");
      value(id, n);
    }
    if (n.has(kFlagTensorMeta)) {
      w_.key("tensor_meta");
      w_.boolean(true);
    }
    if (n.symbols_count != 0) {
      w_.key("free_symbols");
      w_.begin_array();
      for (StrId s : g_.free_symbols(id)) w_.string(str(s));
      w_.end_array();
    }
    const NodeExtra& x = g_.extra(id);
    if (x.binds_symbol != 0) {
      w_.key("binds_symbol");
      w_.string(str(x.binds_symbol));
    }
    if (x.unreplaced_symbols_count != 0) {
      w_.key("free_symbols_unreplaced");
      w_.begin_array();
      for (StrId s : g_.unreplaced_symbols(id)) w_.string(str(s));
      w_.end_array();
    }
    if (x.binds_unreplaced_differs) {
      w_.key("binds_symbol_unreplaced");
      if (x.binds_unreplaced != 0) w_.string(str(x.binds_unreplaced));
      else w_.null();
    }
    if (n.has(kFlagImpure)) {
      w_.key("impure");
      w_.boolean(true);
    }
    if (n.has(kFlagStreamSync)) {
      w_.key("stream_sync");
      w_.boolean(true);
    }
    meta(n, x);
    if (origins_ != nullptr && n.origin != kNoNode && n.origin < origins_->size()) {
      w_.key("origin");
      w_.string(origins_->name(n.origin));
    }
    w_.end_object();
  }

  void meta(const Node& n, const NodeExtra& x) {
    const bool any = n.recompute != RecomputePolicy::kNone || n.has(kFlagAcGraphId) ||
                     n.tag != PartitionerTag::kNone || n.has(kFlagBackwardHook) ||
                     n.has(kFlagNoVcCheck) || n.has(kFlagMemoryBudget) ||
                     n.has(kFlagRegionBudget) || n.has(kFlagShouldOffload) ||
                     n.has(kFlagSavedForOffloading) || n.has(kFlagEpilogueMutation) ||
                     x.custom_context != 0;
    if (!any) return;
    w_.key("meta");
    w_.begin_object();
    if (n.recompute != RecomputePolicy::kNone) {
      w_.key("recompute");
      w_.string(recompute_policy_name(n.recompute));
    }
    if (n.has(kFlagAcGraphId)) {
      w_.key("ac_graph_id");
      w_.integer(x.ac_graph_id);
    }
    if (n.tag != PartitionerTag::kNone) {
      w_.key("partitioner_tag");
      w_.string(n.tag == PartitionerTag::kOther || x.tag_name != 0 ? str(x.tag_name)
                                                                   : partitioner_tag_name(n.tag));
    }
    if (n.has(kFlagBackwardHook)) {
      w_.key("has_backward_hook");
      w_.boolean(true);
    }
    if (n.has(kFlagNoVcCheck)) {
      w_.key("saved_tensor_with_no_vc_check");
      w_.boolean(true);
    }
    if (n.has(kFlagMemoryBudget)) {
      w_.key("memory_budget");
      if (std::isfinite(x.memory_budget)) w_.number(x.memory_budget); else w_.null();
    }
    if (n.has(kFlagRegionBudget)) {
      w_.key("region_memory_budget");
      if (std::isfinite(x.region_memory_budget)) w_.number(x.region_memory_budget); else w_.null();
    }
    if (x.custom_context != 0) {
      w_.key("custom_context");
      w_.raw(str(x.custom_context));
    }
    if (n.has(kFlagShouldOffload)) {
      w_.key("should_offload");
      w_.boolean(true);
    }
    if (n.has(kFlagSavedForOffloading)) {
      w_.key("saved_for_offloading");
      w_.boolean(true);
    }
    if (n.has(kFlagEpilogueMutation)) {
      w_.key("aot_runtime_epilogue_input_mutation");
      w_.boolean(true);
    }
    if (x.original_tensor < g_.values().sizes().tensors) {
      const TensorMeta& t = *g_.values().tensors(x.original_tensor);
      w_.key("original_device");
      w_.string(str(t.device));
    }
    if (x.original_layout && x.original_tensor < g_.values().sizes().tensors) {
      const TensorMeta& t = *g_.values().tensors(x.original_tensor);
      w_.key("original_size");
      w_.begin_array();
      for (const Dim& d : g_.shape(t)) dim(d);
      w_.end_array();
      w_.key("original_stride");
      w_.begin_array();
      for (const Dim& d : g_.stride(t)) dim(d);
      w_.end_array();
    }
    w_.end_object();
  }

  // A node's args tuple is written as a plain array, its kwargs dict as a
  // plain object; nested containers use the tagged forms.
  void container(ArgId root) {
    const Arg& a = g_.arg(root);
    const ArgId stop = root + a.span;
    if (a.kind == ArgKind::kDict) {
      w_.begin_object();
      for (ArgId c = root + 1; c < stop;) {
        dict_key(c);
        c += g_.arg(c).span;
        if (c < stop) {
          arg(c);
          c += g_.arg(c).span;
        } else {
          w_.null();
        }
      }
      w_.end_object();
    } else {
      w_.begin_array();
      for (ArgId c = root + 1; c < stop; c += g_.arg(c).span) arg(c);
      w_.end_array();
    }
  }

  void dict_key(ArgId k) {
    const Arg& a = g_.arg(k);
    switch (a.kind) {
      case ArgKind::kStr: w_.key(str(a.id)); break;
      case ArgKind::kInt: w_.key(std::to_string(a.i)); break;
      case ArgKind::kBool: w_.key(a.i ? "True" : "False"); break;
      case ArgKind::kNone: w_.key("None"); break;
      default: w_.key(arg_kind_name(a.kind)); break;
    }
  }

  void arg(ArgId id) {
    const Arg& a = g_.arg(id);
    auto tagged_str = [&](const char* tag) {
      w_.begin_object();
      w_.key(tag);
      w_.string(str(a.id));
      w_.end_object();
    };
    switch (a.kind) {
      case ArgKind::kNone: w_.null(); break;
      case ArgKind::kBool: w_.boolean(a.i != 0); break;
      case ArgKind::kInt: w_.integer(a.i); break;
      case ArgKind::kFloat: write_float_arg(w_, a.f); break;
      case ArgKind::kStr: w_.string(str(a.id)); break;
      case ArgKind::kNode:
        w_.begin_object();
        w_.key("node");
        w_.string(a.id < g_.size() ? g_.name(a.id) : std::string_view("?"));
        w_.end_object();
        break;
      case ArgKind::kList: container(id); break;
      case ArgKind::kTuple:
      case ArgKind::kDict:
      case ArgKind::kSlice:
        w_.begin_object();
        w_.key(a.kind == ArgKind::kTuple ? "tuple" : a.kind == ArgKind::kDict ? "dict" : "slice");
        if (a.kind == ArgKind::kSlice) {
          w_.begin_array();
          for (ArgId c = id + 1; c < id + a.span; c += g_.arg(c).span) arg(c);
          w_.end_array();
        } else {
          container(id);
        }
        w_.end_object();
        break;
      case ArgKind::kDtype: tagged_str("dtype"); break;
      case ArgKind::kDevice: tagged_str("device"); break;
      case ArgKind::kLayout: tagged_str("layout"); break;
      case ArgKind::kMemoryFormat: tagged_str("memory_format"); break;
      case ArgKind::kTarget: tagged_str("target"); break;
      case ArgKind::kOpaque:
        w_.begin_object();
        w_.key("opaque");
        w_.string(str(a.id));
        if (a.i != -1) {
          w_.key("handle");
          w_.integer(a.i);
        }
        w_.end_object();
        break;
    }
  }

  void dim(const Dim& d) {
    if (d.expr == 0) {
      w_.integer(d.value);
      return;
    }
    w_.begin_object();
    w_.key("expr");
    w_.string(str(d.expr));
    if (d.has_hint) {
      w_.key("hint");
      w_.integer(d.value);
    }
    w_.end_object();
  }

  void tensor(const TensorMeta& t) {
    w_.begin_object();
    w_.key("kind");
    w_.string("tensor");
    w_.key("dtype");
    w_.string(str(t.dtype));
    if (dtype_itemsize(str(t.dtype)) != t.itemsize) {
      w_.key("itemsize");
      w_.integer(t.itemsize);
    }
    w_.key("shape");
    w_.begin_array();
    for (const Dim& d : g_.shape(t)) dim(d);
    w_.end_array();
    if (t.has_stride) {
      w_.key("stride");
      w_.begin_array();
      for (const Dim& d : g_.stride(t)) dim(d);
      w_.end_array();
    }
    if (t.device != 0) {
      w_.key("device");
      w_.string(str(t.device));
    }
    if (t.storage != -1) {
      w_.key("storage");
      w_.integer(t.storage);
    }
    if (t.numel_hint != default_numel(g_, t)) {
      w_.key("numel_hint");
      w_.integer(t.numel_hint);
    }
    w_.end_object();
  }

  void simple_kind(const char* kind) {
    w_.begin_object();
    w_.key("kind");
    w_.string(kind);
    w_.end_object();
  }

  // Containers keep only their tensor items (what the partitioner reads);
  // positions between them are written as {"kind": "none"} and dict keys as
  // the items' positions.
  void value(NodeId id, const Node& n) {
    const auto tensors = g_.tensors(id);
    const NodeExtra& x = g_.extra(id);
    switch (n.value) {
      case ValueKind::kMissing: w_.null(); break;
      case ValueKind::kTensor:
        if (tensors.empty()) simple_kind("none"); else tensor(tensors[0]);
        break;
      case ValueKind::kSymInt:
      case ValueKind::kSymFloat:
      case ValueKind::kSymBool:
        sym_value(n.value, x);
        break;
      case ValueKind::kSequence:
      case ValueKind::kDict:
        container_value(n.value, tensors);
        break;
      case ValueKind::kOpaque:
      case ValueKind::kConstant:
        begin_value(value_kind_name(n.value));
        if (x.repr != 0) {
          w_.key("repr");
          w_.string(str(x.repr));
        }
        if (n.has(kFlagNonScalarConstant)) {
          w_.key("scalar");
          w_.boolean(false);
        }
        w_.end_object();
        break;
      case ValueKind::kGenerator:
        begin_value("generator");
        w_.key("device");
        w_.string(str(x.device));
        if (x.handle >= 0) {
          w_.key("handle");
          w_.integer(x.handle);
        }
        w_.end_object();
        break;
      case ValueKind::kDevice:
        begin_value("device");
        w_.key("device");
        w_.string(str(x.device));
        w_.end_object();
        break;
      default:
        simple_kind(value_kind_name(n.value));
        break;
    }
  }

  // Opens a value object with its "kind"; the caller closes it.
  void begin_value(const char* kind) {
    w_.begin_object();
    w_.key("kind");
    w_.string(kind);
  }

  void sym_value(ValueKind kind, const NodeExtra& x) {
    begin_value(value_kind_name(kind));
    w_.key("expr");
    w_.string(str(x.sym_expr));
    if (x.nested_hint != 0) {
      w_.key("hint");
      w_.begin_object();
      w_.key("nested_int");
      w_.string(str(x.nested_hint));
      w_.end_object();
    } else if (x.has_sym_hint) {
      w_.key("hint");
      if (kind == ValueKind::kSymBool) w_.boolean(x.sym_hint != 0);
      else if (kind == ValueKind::kSymFloat) w_.number(static_cast<double>(x.sym_hint));
      else w_.integer(x.sym_hint);
    }
    w_.end_object();
  }

  void container_value(ValueKind kind, std::span<const TensorMeta> tensors) {
    begin_value(kind == ValueKind::kSequence ? "sequence" : "dict");
    w_.key("items");
    if (kind == ValueKind::kSequence) {
      w_.begin_array();
      int32_t pos = 0;
      for (const TensorMeta& t : tensors) {
        for (; pos < t.index; ++pos) simple_kind("none");
        tensor(t);
        ++pos;
      }
      w_.end_array();
    } else {
      w_.begin_object();
      for (const TensorMeta& t : tensors) {
        w_.key(std::to_string(t.index));
        tensor(t);
      }
      w_.end_object();
    }
    w_.end_object();
  }

  const Graph& g_;
  JsonWriter& w_;
  const Graph* origins_;
};

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kOverload: return "overload";
    case OpKind::kHigherOrder: return "higher_order";
    case OpKind::kFunction: return "function";
    case OpKind::kPacket: return "packet";
  }
  return "overload";
}

void write_tags(JsonWriter& w, uint8_t tags) {
  w.begin_array();
  if (tags & kTagPointwise) w.string("pointwise");
  if (tags & kTagNondeterministicSeeded) w.string("nondeterministic_seeded");
  w.end_array();
}

void write_categories(JsonWriter& w, uint8_t cats) {
  w.begin_array();
  for (const auto& [bit, name] : kOpCategoryNames) {
    if (cats & bit) w.string(name);
  }
  w.end_array();
}

void write_ops(JsonWriter& w, const JointGraph& joint) {
  const Graph& g = joint.graph;
  std::unordered_map<std::string_view, uint8_t> overrides;
  for (const auto& [key, cats] : joint.op_overrides) overrides.emplace(key, cats);
  w.begin_array();
  for (const OpInfo& op : g.ops()) {
    w.newline(4);
    w.begin_object();
    w.key("name");
    w.string(g.str(op.name));
    w.key("kind");
    w.string(op_kind_name(op.kind));
    w.key("namespace");
    w.string(g.str(op.ns));
    w.key("packet");
    w.string(g.str(op.packet));
    w.key("mutable");
    w.boolean(op.is_mutable);
    w.key("view");
    w.boolean(op.is_view);
    if (op.num_returns >= 0) {
      w.key("returns");
      w.integer(op.num_returns);
    }
    w.key("tags");
    write_tags(w, op.tags);
    w.key("packet_tags");
    write_tags(w, op.packet_tags);
    w.key("mutable_args");
    w.begin_array();
    for (StrId a : g.mutable_args(op)) w.string(g.str(a));
    w.end_array();
    if (op.dropout_p_index >= 0) {
      w.key("dropout_p");
      w.begin_object();
      w.key("index");
      w.integer(op.dropout_p_index);
      if (op.dropout_p_has_default) {
        w.key("default");
        const double d = op.dropout_p_default;  // JSON spells non-finite ones as strings
        if (std::isfinite(d)) w.number(d);
        else w.string(std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf"));
      }
      w.end_object();
    }
    const std::string_view key = op.packet != 0 ? g.str(op.packet) : g.str(op.name);
    if (auto it = overrides.find(key); it != overrides.end()) {
      w.key("categories");
      write_categories(w, it->second);
    }
    w.end_object();
  }
  if (!g.ops().empty()) w.break_line(2);
  w.end_array();
}

void write_id_list(JsonWriter& w, const Graph& g, const std::vector<NodeId>& ids, const char* field) {
  w.begin_array();
  for (NodeId id : ids) {
    if (id >= g.size()) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("partition result: field '{}' holds node #{}, which is not in the "
                              "joint graph",
                              field, id));
    }
    w.string(g.name(id));
  }
  w.end_array();
}

// A number JSON can spell: non-finite timings and runtimes are written as 0.
double finite_or_zero(double x) { return std::isfinite(x) ? x : 0.0; }

// One graph of a result, {"nodes": [...]}, origins named by the joint graph.
void write_result_graph(JsonWriter& w, const Graph& joint, const Graph& graph) {
  w.begin_object();
  w.key("nodes");
  GraphWriter(graph, w, &joint).nodes(2);
  w.end_object();
}

void write_snapshots(JsonWriter& w, const Graph& joint, const std::vector<GraphSnapshot>& snapshots) {
  w.begin_array();
  for (const GraphSnapshot& snap : snapshots) {
    w.newline(4);
    w.begin_object();
    w.key("name");
    w.string(snap.name);
    w.key("nodes");
    GraphWriter(snap.graph, w, &joint).nodes(4);
    w.end_object();
  }
  w.break_line(2);
  w.end_array();
}

// "decisions": joint node name -> where it went, why it was banned, what
// replaced it, the reason for its fate (why, the cut's capacity, detail);
// one line each.
void write_decisions(JsonWriter& w, const Graph& g, const std::vector<NodeDecision>& decisions) {
  w.begin_object();
  const size_t n = std::min(decisions.size(), g.size());
  for (NodeId id = 0; id < n; ++id) {
    const NodeDecision& d = decisions[id];
    w.newline(4);
    w.key(g.name(id));
    w.begin_object();
    w.key("where");
    w.string(where_name(d.where));
    if (!d.ban_reason.empty()) {
      w.key("ban");
      w.string(d.ban_reason);
    }
    if (!d.ban_detail.empty()) {
      w.key("ban_detail");
      w.string(d.ban_detail);
    }
    if (d.merged_into != kNoNode && d.merged_into < g.size()) {
      w.key("merged_into");
      w.string(g.name(d.merged_into));
    }
    if (d.why != NodeDecision::Why::kUnknown) {
      w.key("why");
      w.string(why_name(d.why));
    }
    if (d.capacity >= 0) {
      w.key("capacity");
      w.integer(d.capacity);
    }
    if (!d.detail.empty()) {
      w.key("detail");
      w.string(d.detail);
    }
    w.end_object();
  }
  if (n != 0) w.break_line(2);
  w.end_object();
}

}  // namespace

std::string write_joint_graph(const JointGraph& joint) {
  std::string out;
  out.reserve(256 + joint.graph.size() * 160);
  JsonWriter w(out);
  w.begin_object();
  w.newline(2);
  w.key("format");
  w.string("remat.joint_graph");
  w.newline(2);
  w.key("version");
  w.integer(kFormatVersion);
  w.newline(2);
  w.key("num_fwd_outputs");
  w.integer(joint.num_fwd_outputs);
  w.newline(2);
  w.key("static_lifetime_input_indices");
  w.begin_array();
  for (int i : joint.static_lifetime_input_indices) w.integer(i);
  w.end_array();
  w.newline(2);
  if (!joint.torch_version.empty()) {
    w.key("torch_version");
    w.string(joint.torch_version);
    w.newline(2);
  }
  if (!joint.mutated_inputs.empty()) {
    w.key("mutated_inputs");
    w.begin_array();
    for (NodeId id : joint.mutated_inputs) w.string(joint.graph.name(id));
    w.end_array();
    w.newline(2);
  }
  w.key("ops");
  write_ops(w, joint);
  w.newline(2);
  w.key("nodes");
  GraphWriter(joint.graph, w, nullptr).nodes(2);
  if (!joint.nested.empty()) {
    w.newline(2);
    w.key("subgraphs");
    w.begin_array();
    for (const NestedGraph& sub : joint.nested) {
      w.newline(4);
      w.begin_object();
      w.key("name");
      w.string(sub.name);
      w.key("nodes");
      GraphWriter(sub.graph, w, nullptr).nodes(4);
      w.end_object();
    }
    w.break_line(2);
    w.end_array();
  }
  w.break_line(0);
  w.end_object();
  out += '\n';
  return out;
}

std::string write_result(const JointGraph& joint, const PartitionResult& result, bool timings) {
  const Graph& g = joint.graph;
  std::string out;
  out.reserve(512 + (result.forward.size() + result.backward.size()) * 160 + g.size() * 40);
  JsonWriter w(out);
  w.begin_object();
  auto field = [&](const char* k) {
    w.newline(2);
    w.key(k);
  };
  field("format");
  w.string("remat.partition_result");
  field("version");
  w.integer(kFormatVersion);
  field("partitioner");
  w.string(result.partitioner);
  field("num_fwd_outputs");
  w.integer(result.num_fwd_outputs);
  field("saved_values");
  write_id_list(w, g, result.saved_values, "saved_values");
  field("saved_opaque_nodes");
  write_id_list(w, g, result.saved_opaque_nodes, "saved_opaque_nodes");
  field("saved_sym_nodes");
  write_id_list(w, g, result.saved_sym_nodes, "saved_sym_nodes");
  field("num_rng_states");
  w.integer(result.num_rng_states);
  field("forced_must_save");
  write_id_list(w, g, result.forced_must_save, "forced_must_save");
  field("quantized_values");
  write_id_list(w, g, result.quantized_values, "quantized_values");
  field("forward");
  write_result_graph(w, g, result.forward);
  field("backward");
  write_result_graph(w, g, result.backward);
  if (!result.snapshots.empty()) {
    field("snapshots");
    write_snapshots(w, g, result.snapshots);
  }
  field("decisions");
  write_decisions(w, g, result.decisions);
  if (!result.trace.empty()) {
    field("trace");
    io::write_trace(w, g, result.trace);
  }
  field("recompute_runtime");
  w.number(finite_or_zero(result.recompute_runtime));
  if (result.backward_reordered) {
    field("backward_reordered");
    w.boolean(*result.backward_reordered);
  }
  if (!result.peak_search.search.empty()) {
    const PeakSearchSummary& p = result.peak_search;
    field("peak_search");
    w.begin_object();
    w.key("search");
    w.string(p.search);
    w.key("plans_built");
    w.integer(p.plans_built);
    w.key("cuts");
    w.integer(p.cuts);
    w.key("solver_rounds");
    w.integer(p.solver_rounds);
    w.key("recompute_lower_bound");
    if (p.recompute_lower_bound >= 0) w.number(finite_or_zero(p.recompute_lower_bound));
    else w.null();
    w.key("optimal");
    w.boolean(p.optimal);
    w.key("solver_nodes");
    w.integer(p.solver_nodes);
    w.key("stopped_by");
    if (p.stopped_by.empty()) w.null();
    else w.string(p.stopped_by);
    w.key("seconds");
    w.number(finite_or_zero(p.seconds));
    w.end_object();
  }
  field("memory");
  io::write_memory_json(w, result.forward, result.backward, result.memory, 2);
  field("hazards");
  io::write_hazards_json(w, result.forward, result.backward, result.hazards, 2);
  if (timings) {
    field("seconds");
    w.number(finite_or_zero(result.seconds));
    field("stages");
    w.begin_object();
    for (const StageTime& t : result.stages) {
      w.key(t.stage);
      w.number(finite_or_zero(t.seconds));
    }
    w.end_object();
  }
  w.break_line(0);
  w.end_object();
  out += '\n';
  return out;
}

}  // namespace remat
