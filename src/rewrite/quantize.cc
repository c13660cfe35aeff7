// rewrite/quantize.cc — quantize_activations: torch's
// enable_activation_quantization / perform_fp8_activation_quantization
// (quantize_activation_fw, quantize_activation_bw).
//
// Contract: rewrite/quantize.h. The pass runs in three steps, as torch's:
// choose the candidates on the forward's outputs, rewrite the forward (names
// are created position by position, the chains placed right after their
// node), then rewrite the backward (placeholders swapped in place, scale
// placeholders added, dequantization chains placed after their anchor). Each
// graph is rebuilt in one pass over its nodes.
#include "rewrite/quantize.h"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "analyze/analyze.h"
#include "graph/copy.h"
#include "graph/dtypes.h"
#include "graph/query.h"
#include "remat/error.h"
#include "rewrite/node_builder.h"
#include "rewrite/value_meta.h"

namespace remat {
namespace {

constexpr std::string_view kQuantPrefix = "fp8_quant_";
constexpr std::string_view kScalePrefix = "fp8_scale_";
constexpr double kBytesPerMb = 1024.0 * 1024.0;
constexpr double kScaleFloor = 1e-12;  // torch's clamp on the amax before the reciprocal

// A forward output chosen for quantization.
struct Candidate {
  NodeId fw = kNoNode;     // in the forward
  StrId dequant_dtype = 0; // its own dtype, which the backward restores
};

// One quantized output position: the chain built after its node.
struct Chain {
  NodeId node = kNoNode;  // the saved value, in the forward
  size_t position = 0;
  StrId dequant_dtype = 0;
  // Names, in torch's creation order: 12 with scaling (the scale is [6],
  // the quantized value [11]), 1 without.
  std::vector<StrId> names;
  NodeId scale = kNoNode, quant = kNoNode;  // in the new forward
};


std::vector<ArgId> output_items(const Graph& g) {
  const Node& out = g.node(g.output());
  if (out.args == kNoArg) return {};
  const std::vector<ArgId> top = g.children(out.args);
  if (top.empty() || g.arg(top[0]).kind != ArgKind::kTuple) return {};
  return g.children(top[0]);
}

bool is_sym_value(ValueKind v) {
  return v == ValueKind::kSymInt || v == ValueKind::kSymFloat || v == ValueKind::kSymBool;
}

// should_quantize's size test.
bool large_enough(const Graph& fw, NodeId x, const TensorMeta& t,
                  const ActivationQuantizationOptions& o) {
  const std::span<const Dim> shape = fw.shape(t);
  const bool symbolic = std::any_of(shape.begin(), shape.end(), [](const Dim& d) { return d.expr != 0; });
  auto by_hints = [&] {
    int64_t numel = 1;
    for (const Dim& d : shape) {
      if (!d.has_hint) {
        throw Error(ErrorCode::kUnsupported,
                    fmt::format("node '{}': FP8 activation quantization needs the size of a "
                                "tensor with an unbacked symbolic shape (torch raises a "
                                "data-dependent guard error here)",
                                fw.name(x)));
      }
      numel *= d.value;
    }
    return static_cast<double>(numel * t.itemsize) / kBytesPerMb >= o.size_in_mb;
  };
  if (!symbolic) return by_hints();
  const NodeId joint = fw.node(x).origin;
  if (!o.skip_dynamo_guards) {
    if (o.symbolic_size) {
      const std::optional<bool> r = o.symbolic_size(joint, SizeQuery::kGuard);
      if (r.has_value()) return *r;
    }
    return by_hints();
  }
  const std::optional<bool> known =
      o.symbolic_size ? o.symbolic_size(joint, SizeQuery::kStatic) : std::nullopt;
  // Always quantize what is not provably small, or only what is provably large.
  if (o.quantize_dynamic_shape) return known.value_or(true);
  return known.value_or(false);
}

// enable_activation_quantization's loop over the forward's outputs.
std::vector<Candidate> choose(const Graph& g, const Extracted& e,
                              const std::vector<uint8_t>& static_lifetime,
                              const ActivationQuantizationOptions& o,
                              std::vector<LogRecord>* log) {
  const Graph& fw = e.forward;
  const size_t strings = fw.strings().size();
  std::vector<uint8_t> saved(strings, 0), is_static(strings, 0);
  for (NodeId x : e.saved_values) {
    if (o.exclude_primals && g.name(x).find("primals") != std::string_view::npos) continue;
    saved[g.node(x).name] = 1;
  }
  for (NodeId id = 0; id < g.size() && id < static_lifetime.size(); ++id) {
    if (static_lifetime[id]) is_static[g.node(id).name] = 1;
  }
  std::vector<StrId> allowed;
  for (const std::string& d : o.allowed_dtypes) {
    allowed.push_back(fw.find_str(canonical_dtype(d)));
  }

  std::vector<Candidate> out;
  std::vector<uint8_t> chosen(fw.size(), 0);
  const std::vector<ArgId> items = output_items(fw);
  for (size_t i = 0; i < items.size(); ++i) {
    const Arg& a = fw.arg(items[i]);
    if (a.kind != ArgKind::kNode) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("forward output {} is a {}, not a node: torch's FP8 activation "
                              "quantization cannot handle it (it reads the name of every "
                              "forward output)",
                              i, arg_kind_name(a.kind)));
    }
    const NodeId x = a.id;
    const Node& n = fw.node(x);
    if (!saved[n.name]) continue;
    if (n.value == ValueKind::kMissing) continue;  // is_node_meta_valid fails
    if (n.value != ValueKind::kTensor || fw.tensors(x).empty()) {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("node '{}': a saved value whose meta['val'] is a {}, not a tensor "
                              "(torch's should_quantize reads its dtype)",
                              fw.name(x), value_kind_name(n.value)));
    }
    const TensorMeta& t = fw.tensors(x)[0];
    if (std::find(allowed.begin(), allowed.end(), t.dtype) == allowed.end()) continue;
    if (!large_enough(fw, x, t, o)) continue;
    if (is_static[n.name]) {
      if (log) {
        log->push_back({LogRecord::Level::kDebug, false,
                        "Skipping quantization of static input %s: ", {std::string(fw.name(x))}});
      }
      continue;
    }
    if (chosen[x]) continue;
    const DtypeKind kind = dtype_kind(fw.str(t.dtype));
    if (kind != DtypeKind::kFloat && kind != DtypeKind::kInt) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("node '{}': FP8 activation quantization of a {} tensor",
                              fw.name(x), fw.str(t.dtype)));
    }
    chosen[x] = 1;
    out.push_back({x, t.dtype});
  }
  return out;
}

// --- building nodes ----------------------------------------------------------

class NodeMaker {
 public:
  NodeMaker(const Graph& src, GraphBuilder& b, NodeCopier& copier, int64_t& storage)
      : src_(src), b_(b), copier_(copier), storage_(storage) {}

  // A call_function node `op(args...)` with value `v`.
  template <typename... Args>
  NodeId call(StrId name, std::string_view op, const TensorValue& v, const Args&... args) {
    Node n;
    n.name = name;
    n.kind = NodeKind::kCallFunction;
    n.target = b_.intern(op);
    n.op = op_id(op);
    n.origin = kCreatedNode;
    set_tensor_value(b_, src_.strings(), n, v, storage_++);
    n.args = b_.begin(ArgKind::kTuple);
    (add(args), ...);
    b_.end(n.args);
    n.kwargs = b_.begin(ArgKind::kDict);
    b_.end(n.kwargs);
    return b_.add_node(n);
  }

  struct NodeRef { NodeId id; };
  struct DtypeRef { StrId dtype; };
  struct IntList { int64_t value; };

 private:
  OpId op_id(std::string_view name) { return build::op_in(src_, copier_, b_, name); }
  void add(NodeRef r) { build::node(b_, r.id); }
  void add(DtypeRef r) { build::dtype(b_, r.dtype); }
  void add(double f) { build::real(b_, f); }
  void add(bool v) { build::boolean(b_, v); }
  void add(IntList l) {
    const ArgId list = b_.begin(ArgKind::kList);
    build::integer(b_, l.value);
    b_.end(list);
  }

  const Graph& src_;
  GraphBuilder& b_;
  NodeCopier& copier_;
  int64_t& storage_;
};

using NodeRef = NodeMaker::NodeRef;
using DtypeRef = NodeMaker::DtypeRef;

struct Dtypes {
  StrId f32, f64, quant;
  uint16_t quant_size;
};

// The nodes torch inserts after chain.node, in its order.
void emit_chain(const Graph& fw, NodeMaker& make, Chain& c, NodeId x,
                const Dtypes& dt, double lo, double hi, bool scaling) {
  StringPool& pool = *fw.shared_strings();
  const TensorValue xv = tensor_value(fw, c.node);
  auto unary = [&](const TensorValue& in, StrId dtype, uint16_t size) {
    const TensorValue* ops[] = {&in};
    return pointwise(pool, ops, dtype, size);
  };
  if (!scaling) {
    c.quant = make.call(c.names[0], "prims.convert_element_type.default",
                        unary(xv, dt.quant, dt.quant_size), NodeRef{x}, DtypeRef{dt.quant});
    return;
  }
  const TensorValue abs_v = unary(xv, xv.dtype, xv.itemsize);
  const NodeId abs = make.call(c.names[0], "aten.abs.default", abs_v, NodeRef{x});
  const TensorValue amax_v = amax_keepdim_last(pool, abs_v);
  const NodeId amax = make.call(c.names[1], "aten.amax.default", amax_v, NodeRef{abs},
                                NodeMaker::IntList{-1}, true);
  const TensorValue f64_v = unary(amax_v, dt.f64, 8);
  const NodeId amax64 = make.call(c.names[2], "prims.convert_element_type.default", f64_v,
                                  NodeRef{amax}, DtypeRef{dt.f64});
  const NodeId floor = make.call(c.names[3], "aten.clamp_min.default", unary(f64_v, dt.f64, 8),
                                 NodeRef{amax64}, kScaleFloor);
  const NodeId recip = make.call(c.names[4], "aten.reciprocal.default", unary(f64_v, dt.f64, 8),
                                 NodeRef{floor});
  const NodeId scaled = make.call(c.names[5], "aten.mul.Tensor", unary(f64_v, dt.f64, 8),
                                  NodeRef{recip}, hi);
  const TensorValue scale_v = unary(f64_v, dt.f32, 4);
  c.scale = make.call(c.names[6], "prims.convert_element_type.default", scale_v, NodeRef{scaled},
                      DtypeRef{dt.f32});
  const TensorValue x32_v = unary(xv, dt.f32, 4);
  const NodeId x32 = make.call(c.names[7], "prims.convert_element_type.default", x32_v,
                               NodeRef{x}, DtypeRef{dt.f32});
  const TensorValue* both[] = {&x32_v, &scale_v};
  const TensorValue prod_v = pointwise(pool, both, dt.f32, 4);
  const NodeId prod = make.call(c.names[8], "aten.mul.Tensor", prod_v, NodeRef{x32},
                                NodeRef{c.scale});
  const NodeId low = make.call(c.names[9], "aten.clamp_min.default", unary(prod_v, dt.f32, 4),
                               NodeRef{prod}, lo);
  const TensorValue clamped_v = unary(prod_v, dt.f32, 4);
  const NodeId high = make.call(c.names[10], "aten.clamp_max.default", clamped_v, NodeRef{low}, hi);
  c.quant = make.call(c.names[11], "prims.convert_element_type.default",
                      unary(clamped_v, dt.quant, dt.quant_size), NodeRef{high},
                      DtypeRef{dt.quant});
}

// quantize_activation_fw.
Graph rewrite_forward(const Graph& fw, std::vector<Chain>& chains, bool scaling, const Dtypes& dt,
                      double lo, double hi, int64_t& storage) {
  const size_t n = fw.size();
  // Chains by node; several at one node stack in reverse creation order,
  // since each is inserted right after the node.
  std::vector<std::vector<size_t>> at(n);
  for (size_t k = chains.size(); k-- > 0;) at[chains[k].node].push_back(k);

  GraphBuilder b(fw);
  NodeCopier copier(fw, b);
  NodeMaker make(fw, b, copier, storage);
  std::vector<NodeId> remap(n, kNoNode);
  for (NodeId id = 0; id < n; ++id) {
    const Node& src = fw.node(id);
    if (src.kind == NodeKind::kOutput) break;
    remap[id] = copier.copy(id, remap);
    for (size_t k : at[id]) emit_chain(fw, make, chains[k], remap[id], dt, lo, hi, scaling);
  }

  // The output, updated in place: quantized values at their positions, the
  // scales before the trailing sym nodes.
  const NodeId out_id = fw.output();
  const std::vector<ArgId> items = output_items(fw);
  std::vector<NodeId> quant_at(items.size(), kNoNode);
  for (const Chain& c : chains) quant_at[c.position] = c.quant;
  size_t split = items.size();
  for (size_t i = items.size(); i-- > 0;) {
    const Arg& a = fw.arg(items[i]);
    if (a.kind != ArgKind::kNode || !is_sym_value(fw.node(a.id).value)) {
      split = i + 1;
      break;
    }
  }
  Node out;
  copier.copy_value(out_id, out);
  out.origin = joint_id(fw, out_id);
  out.args = b.begin(ArgKind::kTuple);
  const ArgId values = b.begin(ArgKind::kTuple);
  auto item = [&](size_t i) {
    if (quant_at[i] == kNoNode) {
      copier.copy_args(items[i], remap);
      return;
    }
    build::node(b, quant_at[i]);
  };
  for (size_t i = 0; i < split; ++i) item(i);
  for (const Chain& c : chains) {
    if (c.scale == kNoNode) continue;
    build::node(b, c.scale);
  }
  for (size_t i = split; i < items.size(); ++i) item(i);
  b.end(values);
  b.end(out.args);
  out.kwargs = b.begin(ArgKind::kDict);
  b.end(out.kwargs);
  b.add_node(out);
  return b.finish();
}

// The saved value an fp8_quant name stands for: torch's
// re.sub(r"^fp8_quant_pos_\d+_", "", name).
std::string_view strip_quant_prefix(std::string_view name) {
  constexpr std::string_view kPos = "fp8_quant_pos_";
  if (!name.starts_with(kPos)) return name;
  size_t i = kPos.size();
  const size_t digits = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == digits || i >= name.size() || name[i] != '_') return name;
  return name.substr(i + 1);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit = s.find(from); hit != std::string_view::npos; hit = s.find(from, at)) {
    out.append(s.substr(at, hit - at)).append(to);
    at = hit + from.size();
  }
  out.append(s.substr(at));
  return out;
}

// The name FX gives a node created as `candidate` in the graph of `names`.
StrId fresh_name(FxNamespace& names, const Graph& g, std::string_view candidate) {
  return names.create(g.shared_strings()->intern(candidate));
}

// A placeholder the backward gains: a quantized saved value or a scale.
struct NewInput {
  NodeId fw = kNoNode;    // the forward node whose value it takes
  StrId name = 0;
  NodeId made = kNoNode;  // in the new backward
};

// One dequantization, anchored after a node of the new backward's
// placeholder list.
struct Dequant {
  size_t input = 0;        // the quantized placeholder (index into quant inputs)
  StrId dtype = 0;
  std::vector<StrId> names;  // 3 with scaling, 1 without
  // The anchor: an old backward node, or a scale placeholder.
  NodeId anchor_old = kNoNode;
  size_t anchor_scale = SIZE_MAX;
  size_t scale = SIZE_MAX;   // the scale it divides by, with scaling
  NodeId scale_old = kNoNode;  // ... when that is an old placeholder
};

struct BackwardPlan {
  std::vector<NodeId> replaced_old;  // per quant input: the placeholder it replaces
  std::vector<StrId> dequant_dtype;  // per quant input: the dtype it had
  std::vector<NewInput> quant, scales;
  NodeId scale_after = kNoNode;      // old placeholder the scales follow
  std::vector<Dequant> dequants;     // in torch's processing order
};

// Plans the backward's rewrite in torch's order: the quantized inputs, then
// the scales, then each dequantization. Names are taken from `names` in
// that order, as torch creates the nodes.
class BackwardPlanner {
 public:
  BackwardPlanner(const Graph& bw, const Graph& new_fw, FxNamespace& names,
                  const std::vector<Candidate>& chosen, const Graph& old_fw,
                  const ActivationQuantizationOptions& o)
      : bw_(bw), new_fw_(new_fw), names_(names), chosen_(chosen), old_fw_(old_fw), o_(o),
        quant_of_old_(bw.size(), 0) {
    for (NodeId id = 0; id < bw.size(); ++id) {
      if (bw.node(id).kind == NodeKind::kPlaceholder) placeholders_.push_back(id);
    }
  }

  BackwardPlan run() {
    const std::vector<ArgId> items = output_items(new_fw_);
    quant_inputs(items);
    if (o_.scale_forward()) scale_inputs(items);
    dequants();
    return std::move(plan_);
  }

 private:
  // The quantized placeholders, in forward-output order, each replacing the
  // placeholder of the value it quantizes.
  void quant_inputs(const std::vector<ArgId>& items) {
    // By name: the last placeholder (torch's dict keeps the last of equal
    // names) and the chosen candidate.
    std::unordered_map<StrId, NodeId> placeholder_by_name;
    for (NodeId id : placeholders_) placeholder_by_name[bw_.node(id).name] = id;
    std::unordered_map<StrId, size_t> chosen_by_name;
    for (size_t k = 0; k < chosen_.size(); ++k)
      chosen_by_name.try_emplace(old_fw_.node(chosen_[k].fw).name, k);
    for (ArgId item : items) {
      const Arg& a = new_fw_.arg(item);
      if (a.kind != ArgKind::kNode) continue;
      const std::string_view name = new_fw_.name(a.id);
      if (name.find(kQuantPrefix) == std::string_view::npos) continue;
      const std::string_view saved = strip_quant_prefix(name);
      const auto p = placeholder_by_name.find(bw_.find_str(saved));
      const auto c = chosen_by_name.find(bw_.find_str(saved));
      if (p == placeholder_by_name.end() || c == chosen_by_name.end()) {
        throw Error(ErrorCode::kInvalidGraph,
                    fmt::format("forward output '{}': FP8 activation quantization finds no "
                                "quantized backward input '{}' for it",
                                name, saved));
      }
      const NodeId old = p->second;
      NewInput in;
      in.fw = a.id;
      in.name = fresh_name(names_, bw_, name);
      plan_.replaced_old.push_back(old);
      plan_.dequant_dtype.push_back(chosen_[c->second].dequant_dtype);
      plan_.quant.push_back(in);
      quant_of_old_[old] = in.name;
    }
  }

  // The scale placeholders, in forward-output order, after the last
  // placeholder whose target is no tangent.
  void scale_inputs(const std::vector<ArgId>& items) {
    plan_.scale_after = placeholders_.back();
    for (size_t k = placeholders_.size(); k-- > 0;) {
      const NodeId id = placeholders_[k];
      const std::string_view target =
          quant_of_old_[id] != 0 ? bw_.str(quant_of_old_[id]) : bw_.str(bw_.node(id).target);
      if (target.find("tangents") == std::string_view::npos) {
        plan_.scale_after = id;
        break;
      }
    }
    for (ArgId item : items) {
      const Arg& a = new_fw_.arg(item);
      if (a.kind != ArgKind::kNode) continue;
      const std::string_view name = new_fw_.name(a.id);
      if (name.find(kScalePrefix) == std::string_view::npos) continue;
      NewInput in;
      in.fw = a.id;
      in.name = fresh_name(names_, bw_, name);
      plan_.scales.push_back(in);
    }
  }

  // Dequantization, in the new placeholder order (a replaced placeholder
  // keeps its position).
  void dequants() {
    std::vector<size_t> quant_index(bw_.size(), SIZE_MAX);
    for (size_t k = 0; k < plan_.replaced_old.size(); ++k) quant_index[plan_.replaced_old[k]] = k;
    const ScaleLookup scales = scale_lookup();
    for (NodeId id : placeholders_) {
      const size_t k = quant_index[id];
      if (k == SIZE_MAX) continue;
      const std::string_view qname = bw_.str(plan_.quant[k].name);
      Dequant d;
      d.input = k;
      d.dtype = plan_.dequant_dtype[k];
      if (o_.scale_backward()) {
        find_scale(scales, qname, d);
        for (const char* n : {"convert_element_type_default", "div_tensor",
                              "convert_element_type_default"}) {
          d.names.push_back(fresh_name(names_, bw_, n));
        }
      } else {
        d.anchor_old = id;
        d.names.push_back(fresh_name(names_, bw_, fmt::format("dequant_{}", qname)));
      }
      plan_.dequants.push_back(std::move(d));
    }
  }

  // Scale lookups by name: the first old placeholder (position, id) and the
  // first scale of each name, and the position the scales follow.
  struct ScaleLookup {
    std::unordered_map<StrId, std::pair<size_t, NodeId>> first_old;
    std::unordered_map<StrId, size_t> first_scale;
    size_t after_pos = 0;
  };

  ScaleLookup scale_lookup() const {
    ScaleLookup l;
    l.after_pos = placeholders_.size();
    for (size_t i = 0; i < placeholders_.size(); ++i) {
      const NodeId p = placeholders_[i];
      l.first_old.try_emplace(quant_of_old_[p] != 0 ? quant_of_old_[p] : bw_.node(p).name, i, p);
      if (p == plan_.scale_after) l.after_pos = i;
    }
    for (size_t k = 0; k < plan_.scales.size(); ++k) l.first_scale.try_emplace(plan_.scales[k].name, k);
    return l;
  }

  // The scale the dequantization of `qname` divides by: the first
  // placeholder of that name, in graph order (the old ones come first up to
  // scale_after, then the scales, then the rest).
  void find_scale(const ScaleLookup& l, std::string_view qname, Dequant& d) const {
    const std::string scale_name = std::string(kScalePrefix) + replace_all(qname, kQuantPrefix, "");
    const StrId wanted = bw_.find_str(scale_name);
    const auto old = l.first_old.find(wanted);
    const auto scale = l.first_scale.find(wanted);
    const bool old_first = old != l.first_old.end() && old->second.first <= l.after_pos;
    if (wanted != 0 && (old_first || scale == l.first_scale.end()) && old != l.first_old.end()) {
      d.anchor_old = d.scale_old = old->second.second;
    } else if (wanted != 0 && scale != l.first_scale.end()) {
      d.anchor_scale = d.scale = scale->second;
    } else {
      throw Error(ErrorCode::kInvalidGraph,
                  fmt::format("backward input '{}': FP8 activation quantization finds no "
                              "scale input '{}' (torch raises StopIteration)",
                              qname, scale_name));
    }
  }

  const Graph& bw_;
  const Graph& new_fw_;
  FxNamespace& names_;
  const std::vector<Candidate>& chosen_;
  const Graph& old_fw_;
  const ActivationQuantizationOptions& o_;
  std::vector<NodeId> placeholders_;
  std::vector<StrId> quant_of_old_;  // new name of a replaced placeholder
  BackwardPlan plan_;
};

BackwardPlan plan_backward(const Graph& bw, const Graph& new_fw, FxNamespace& names,
                           const std::vector<Candidate>& chosen, const Graph& old_fw,
                           const ActivationQuantizationOptions& o) {
  return BackwardPlanner(bw, new_fw, names, chosen, old_fw, o).run();
}

// quantize_activation_bw, after perform_fp8_activation_quantization's
// placeholder changes.
Graph rewrite_backward(const Graph& bw, const Graph& new_fw, BackwardPlan& plan,
                       const ActivationQuantizationOptions& o, int64_t& storage) {
  const size_t n = bw.size();
  const bool scaling = o.scale_backward();
  std::vector<size_t> quant_index(n, SIZE_MAX);
  for (size_t k = 0; k < plan.replaced_old.size(); ++k) quant_index[plan.replaced_old[k]] = k;
  // Dequantizations by anchor; several at one anchor stack in reverse
  // processing order (each is inserted right after the anchor).
  std::vector<std::vector<size_t>> at_old(n), at_scale(plan.scales.size());
  for (size_t k = plan.dequants.size(); k-- > 0;) {
    const Dequant& d = plan.dequants[k];
    if (d.anchor_old != kNoNode) at_old[d.anchor_old].push_back(k);
    else at_scale[d.anchor_scale].push_back(k);
  }

  GraphBuilder b(bw);
  NodeCopier copier(bw, b);
  NodeCopier from_fw(new_fw, b);  // the new placeholders take forward values
  NodeMaker make(bw, b, copier, storage);
  StringPool& pool = *bw.shared_strings();
  std::vector<NodeId> remap(n, kNoNode);

  auto dequantize = [&](size_t k) {
    const Dequant& d = plan.dequants[k];
    const NewInput& q = plan.quant[d.input];
    const TensorValue qv = tensor_value(new_fw, q.fw);
    const uint16_t size = dtype_itemsize(pool.view(d.dtype));
    const TensorValue* in[] = {&qv};
    const TensorValue restored = pointwise(pool, in, d.dtype, size);
    NodeId last;
    if (!scaling) {
      last = make.call(d.names[0], "prims.convert_element_type.default", restored, NodeRef{q.made},
                       DtypeRef{d.dtype});
    } else {
      const NodeId scale_id = d.scale_old != kNoNode ? remap[d.scale_old] : plan.scales[d.scale].made;
      const NodeId scale_fw = d.scale_old != kNoNode ? kNoNode : plan.scales[d.scale].fw;
      const TensorValue sv =
          scale_fw != kNoNode ? tensor_value(new_fw, scale_fw) : tensor_value(bw, d.scale_old);
      const NodeId widened = make.call(d.names[0], "prims.convert_element_type.default", restored,
                                       NodeRef{q.made}, DtypeRef{d.dtype});
      // float64 stays; anything else divided by a float32 scale is float32.
      const bool f64 = pool.view(d.dtype) == "float64";
      const StrId div_dtype = f64 ? d.dtype : pool.intern("float32");
      const TensorValue* both[] = {&restored, &sv};
      const TensorValue quotient = pointwise(pool, both, div_dtype, f64 ? 8 : 4);
      const NodeId divided = make.call(d.names[1], "aten.div.Tensor", quotient, NodeRef{widened},
                                       NodeRef{scale_id});
      const TensorValue* in2[] = {&quotient};
      last = make.call(d.names[2], "prims.convert_element_type.default",
                       pointwise(pool, in2, d.dtype, size), NodeRef{divided}, DtypeRef{d.dtype});
    }
    remap[plan.replaced_old[d.input]] = last;  // every other use reads the dequantized value
  };

  for (NodeId id = 0; id < n; ++id) {
    const size_t k = quant_index[id];
    if (k != SIZE_MAX) {
      NewInput& q = plan.quant[k];
      q.made = from_fw.copy_as_placeholder(q.fw, kCreatedNode, q.name);
      remap[id] = q.made;
    } else {
      remap[id] = copier.copy(id, remap);
    }
    for (size_t d : at_old[id]) dequantize(d);
    if (id != plan.scale_after) continue;
    for (size_t s = 0; s < plan.scales.size(); ++s) {
      NewInput& in = plan.scales[s];
      in.made = from_fw.copy_as_placeholder(in.fw, kCreatedNode, in.name);
      for (size_t d : at_scale[s]) dequantize(d);
    }
  }
  return b.finish();
}

// torch 2.11 quantizes a user output that is also a saved value, and its
// graphs are broken (an fp8 tensor for the user; a dead backward
// placeholder the runtime still expects a tangent for). Not reproduced.
[[noreturn]] void refuse_quantized_user_output(const Graph& fw, NodeId x, size_t position) {
  throw Error(ErrorCode::kUnsupported,
              fmt::format("node '{}': torch 2.11's FP8 activation quantization also quantizes "
                          "user output {}, which is also a saved value; the graphs it builds "
                          "return an fp8 tensor to the user and fail at run time, and remat does "
                          "not reproduce them (2.12 on, user outputs are left alone)",
                          fw.name(x), position));
}

}  // namespace

std::vector<NodeId> quantize_activations(const Graph& g, Extracted& e,
                                         const std::vector<uint8_t>& static_lifetime,
                                         int num_fwd_outputs,
                                         const ActivationQuantizationOptions& options,
                                         std::vector<GraphSnapshot>* snapshots,
                                         std::vector<LogRecord>* log,
                                         const TorchBehavior& torch) {
  const std::vector<Candidate> chosen = choose(g, e, static_lifetime, options, log);
  if (chosen.empty()) return {};

  const Graph& fw = e.forward;
  const std::string_view quant_type = canonical_dtype(options.quant_type);
  const auto [lo, hi] = float_range(quant_type).value();  // validate() checked it exists
  StringPool& pool = *fw.shared_strings();
  const Dtypes dt{pool.intern("float32"), pool.intern("float64"), pool.intern(quant_type),
                  dtype_itemsize(quant_type)};
  const bool scaling = options.scale_forward();

  // Forward: names in position order, as torch creates the nodes.
  std::vector<uint8_t> is_candidate(fw.size(), 0);
  for (const Candidate& c : chosen) is_candidate[c.fw] = 1;
  std::vector<Chain> chains;
  const std::vector<ArgId> items = output_items(fw);
  const size_t user_outputs = static_cast<size_t>(std::max(num_fwd_outputs, 0));
  // 2.12 on, the walk skips the user's outputs; 2.11 walks them too.
  const size_t first = torch.quantize_skips_user_outputs ? user_outputs : 0;
  for (size_t i = first; i < items.size(); ++i) {
    const NodeId x = fw.arg(items[i]).id;
    if (!is_candidate[x]) continue;
    if (i < user_outputs) refuse_quantized_user_output(fw, x, i);
    Chain c;
    c.node = x;
    c.position = i;
    const std::string_view name = fw.name(x);
    if (scaling) {
      for (const char* n : {"abs_default", "amax_default", "convert_element_type_default",
                            "clamp_min_default", "reciprocal_default", "mul_tensor"}) {
        c.names.push_back(fresh_name(e.forward_names, fw, n));
      }
      c.names.push_back(fresh_name(e.forward_names, fw, fmt::format("fp8_scale_pos_{}_{}", i, name)));
      for (const char* n : {"convert_element_type_default", "mul_tensor", "clamp_min_default",
                            "clamp_max_default"}) {
        c.names.push_back(fresh_name(e.forward_names, fw, n));
      }
    }
    c.names.push_back(fresh_name(e.forward_names, fw, fmt::format("fp8_quant_pos_{}_{}", i, name)));
    chains.push_back(std::move(c));
  }

  const Graph* graphs[] = {&e.forward, &e.backward};
  int64_t storage = fresh_storage(graphs);
  if (snapshots) snapshots->push_back({"before_activation_quantization_fwd_aten_pass", e.forward});
  Graph new_fw = rewrite_forward(fw, chains, scaling, dt, lo, hi, storage);
  if (snapshots) {
    snapshots->push_back({"after_activation_quantization_fwd_aten_pass", new_fw});
    snapshots->push_back({"before_activation_quantization_bwd_aten_pass", e.backward});
  }
  BackwardPlan plan = plan_backward(e.backward, new_fw, e.backward_names, chosen, fw, options);
  Graph new_bw = rewrite_backward(e.backward, new_fw, plan, options, storage);
  if (snapshots) snapshots->push_back({"after_activation_quantization_bwd_aten_pass", new_bw});

  std::vector<NodeId> quantized;
  for (const Candidate& c : chosen) quantized.push_back(fw.node(c.fw).origin);
  e.forward = std::move(new_fw);
  e.backward = std::move(new_bw);
  return quantized;
}

}  // namespace remat
