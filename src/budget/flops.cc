// budget/flops.cc — FlopCounterMode's formulas over the IR, per torch
// release, and the runtime estimators built on them.
//
// See flops.h for the contract. Counts are exact integers (__int128, as
// Python's unbounded ints for any realistic shape) rounded once to double,
// so a count above 2^53 rounds exactly as torch's int -> float conversion.
#include "budget/flops.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "remat/error.h"
#include "remat/torch_release.h"

namespace remat {
namespace {

using Count = __int128;
using Shape = std::vector<int64_t>;

// torch's _remove_symbols_without_guarding(x, fallback=4096).
constexpr int64_t kNoHintFallback = 4096;

enum class Formula {
  kNone,
  kMm,            // (a, b)
  kAddmm,         // (self, a, b)
  kBmm,           // (a, b)
  kBaddbmm,       // (self, a, b)
  kScaledMm,      // (a, b, ...)
  kConv,          // (input, weight, bias, stride, padding, dilation, transposed, ...)
  kCudnnConv,     // (input, weight, padding, stride, dilation, groups, benchmark, ...)
  kConvBackward,  // (grad_out, input, weight, bias_sizes, stride, padding, dilation,
                  //  transposed, output_padding, groups, output_mask)
  kSdpa,          // (query, key, value, ...)
  kSdpaBackward,  // (grad_out, query, key, value, ...)
  kFlashForward,
  kEfficientForward,
  kFlashBackward,
  kEfficientBackward,
  kFlexForward,   // higher_order.flex_attention (query, key, value, ...)
  kFlexBackward,  // higher_order.flex_attention_backward (query, key, value, out, lse, grad_out, ...)
};

// One formula FlopCounterMode has, and the switch of the release that
// registered it (nullptr: every supported release has it).
struct FormulaEntry {
  FormulaEntry(Formula f, bool TorchBehavior::*s = nullptr) : formula(f), since(s) {}  // NOLINT: implicit
  Formula formula;
  bool TorchBehavior::*since;
};

// Keyed by overload packet, or by "higher_order.<name>" for a HOP.
const std::map<std::string_view, FormulaEntry>& formula_table() {
  static const std::map<std::string_view, FormulaEntry> table = {
      {"aten.mm", Formula::kMm},
      {"aten.addmm", Formula::kAddmm},
      {"aten.bmm", Formula::kBmm},
      {"aten.baddbmm", Formula::kBaddbmm},
      {"aten._scaled_mm", Formula::kScaledMm},
      {"aten.convolution", Formula::kConv},
      {"aten._convolution", Formula::kConv},
      {"aten.convolution_overrideable", Formula::kConv},
      {"aten.cudnn_convolution", Formula::kCudnnConv},
      {"aten.convolution_backward", Formula::kConvBackward},
      {"aten._scaled_dot_product_efficient_attention", Formula::kSdpa},
      {"aten._scaled_dot_product_flash_attention", Formula::kSdpa},
      {"aten._scaled_dot_product_cudnn_attention", Formula::kSdpa},
      {"aten._scaled_dot_product_efficient_attention_backward", Formula::kSdpaBackward},
      {"aten._scaled_dot_product_flash_attention_backward", Formula::kSdpaBackward},
      {"aten._scaled_dot_product_cudnn_attention_backward", Formula::kSdpaBackward},
      {"aten._flash_attention_forward", Formula::kFlashForward},
      {"aten._efficient_attention_forward", Formula::kEfficientForward},
      {"aten._flash_attention_backward", Formula::kFlashBackward},
      {"aten._efficient_attention_backward", Formula::kEfficientBackward},
      // 2.15 registered the CPU flash kernels with the SDPA formulas (before,
      // FlopCounterMode counts them 0).
      {"aten._scaled_dot_product_flash_attention_for_cpu",
       {Formula::kSdpa, &TorchBehavior::flops_sdpa_for_cpu}},
      {"aten._scaled_dot_product_flash_attention_for_cpu_backward",
       {Formula::kSdpaBackward, &TorchBehavior::flops_sdpa_for_cpu}},
      // Registered as formulas since 2.13, but only 2.15's FlopCounterMode
      // runs a HOP that has one (see hop_formula_missing).
      {"higher_order.flex_attention", {Formula::kFlexForward, &TorchBehavior::flops_registered_hops}},
      {"higher_order.flex_attention_backward",
       {Formula::kFlexBackward, &TorchBehavior::flops_registered_hops}},
  };
  return table;
}

// The table entry of a key, whatever the release; nullptr when none.
const FormulaEntry* find_formula(std::string_view key) {
  auto it = formula_table().find(key);
  return it == formula_table().end() ? nullptr : &it->second;
}

bool registered_in(const FormulaEntry& e, const TorchBehavior& torch) {
  return e.since == nullptr || torch.*e.since;
}

// The key FlopCounterMode looks a node's op up by: the overload packet, or
// the HOP itself.
std::string_view formula_key(const Graph& g, const OpInfo& op) {
  return g.str(op.kind == OpKind::kOverload ? op.packet : op.name);
}

Formula formula_of(const Graph& g, NodeId n, const TorchBehavior& torch) {
  const OpInfo* op = g.op(n);
  if (op == nullptr || op->kind == OpKind::kFunction) return Formula::kNone;
  const FormulaEntry* e = find_formula(formula_key(g, *op));
  return e != nullptr && registered_in(*e, torch) ? e->formula : Formula::kNone;
}

// ---------------------------------------------------------------------------
// Reading a node's arguments as the formula sees them after torch
// materializes them: tensors become their hinted shapes, SymInts their hints.

class ArgReader {
 public:
  ArgReader(const Graph& g, NodeId n) : g_(g), n_(n) {
    const Node& node = g.node(n);
    if (node.args != kNoArg) positional_ = g.children(node.args);
    if (node.kwargs != kNoArg) {
      const std::vector<ArgId> kv = g.children(node.kwargs);
      for (size_t i = 0; i + 1 < kv.size(); i += 2) keywords_.emplace_back(kv[i], kv[i + 1]);
    }
  }

  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(ErrorCode::kInvalidGraph, fmt::format("{}: {}", where(), msg));
  }
  // A failure torch raises too, as the Python exception `type` with `msg`.
  [[noreturn]] void torch_raises(std::string_view type, std::string msg) const {
    throw TorchError(ErrorCode::kInvalidGraph, std::string(type), std::move(msg), where());
  }
  std::string where() const {
    const OpInfo* op = g_.op(n_);
    return fmt::format("node '{}' ({}): flop formula", g_.name(n_), op ? g_.str(op->name) : "?");
  }
  size_t positional_count() const { return positional_.size(); }

  // The argument at `pos`, or the keyword `name`; kNoArg when absent.
  ArgId at(size_t pos, std::string_view name) const {
    if (pos < positional_.size()) return positional_[pos];
    for (const auto& [key, value] : keywords_) {
      if (g_.str(g_.arg(key).id) == name) return value;
    }
    return kNoArg;
  }

  bool is_none(ArgId a) const { return a == kNoArg || g_.arg(a).kind == ArgKind::kNone; }

  Shape shape(ArgId a, std::string_view what) const {
    const TensorMeta* t = tensor(a);
    if (t == nullptr) fail(fmt::format("argument '{}' is not a tensor", what));
    Shape s;
    s.reserve(t->rank);
    for (const Dim& d : g_.shape(*t)) s.push_back(d.has_hint ? d.value : kNoHintFallback);
    return s;
  }

  int64_t integer(ArgId a, std::string_view what) const {
    if (a == kNoArg) fail(fmt::format("argument '{}' is missing", what));
    const Arg& arg = g_.arg(a);
    if (arg.kind == ArgKind::kInt || arg.kind == ArgKind::kBool) return arg.i;
    if (arg.kind == ArgKind::kNode) {
      if (g_.node(arg.id).value == ValueKind::kSymInt) {
        const NodeExtra& src = g_.extra(arg.id);
        return src.has_sym_hint ? src.sym_hint : kNoHintFallback;
      }
    }
    fail(fmt::format("argument '{}' is not an integer", what));
  }

  // Python truthiness of a bool-like argument; a SymBool materializes as True.
  bool truth(ArgId a, std::string_view what) const {
    if (a == kNoArg) fail(fmt::format("argument '{}' is missing", what));
    const Arg& arg = g_.arg(a);
    switch (arg.kind) {
      case ArgKind::kBool:
      case ArgKind::kInt: return arg.i != 0;
      case ArgKind::kFloat: return arg.f != 0;
      case ArgKind::kNone: return false;
      case ArgKind::kList:
      case ArgKind::kTuple: return arg.span > 1;
      case ArgKind::kNode: {
        const Node& src = g_.node(arg.id);
        if (src.value == ValueKind::kSymBool) return true;
        if (src.value == ValueKind::kSymInt) return integer(a, what) != 0;
        break;
      }
      default: break;
    }
    fail(fmt::format("argument '{}' is not a bool", what));
  }

  std::vector<ArgId> items(ArgId a, std::string_view what) const {
    if (a == kNoArg) fail(fmt::format("argument '{}' is missing", what));
    const ArgKind k = g_.arg(a).kind;
    if (k != ArgKind::kList && k != ArgKind::kTuple) {
      fail(fmt::format("argument '{}' is not a list", what));
    }
    return g_.children(a);
  }

  std::vector<int64_t> ints(ArgId a, std::string_view what) const {
    std::vector<int64_t> out;
    for (ArgId c : items(a, what)) out.push_back(integer(c, what));
    return out;
  }

  // The first tensor of the node's own value (its output).
  const TensorMeta* output() const {
    auto ts = g_.tensors(n_);
    return ts.empty() ? nullptr : &ts[0];
  }
  Shape output_shape() const {
    const TensorMeta* t = output();
    if (t == nullptr) fail("the node has no tensor output to read the shape from");
    Shape s;
    for (const Dim& d : g_.shape(*t)) s.push_back(d.has_hint ? d.value : kNoHintFallback);
    return s;
  }

 private:
  const TensorMeta* tensor(ArgId a) const {
    if (a == kNoArg || g_.arg(a).kind != ArgKind::kNode) return nullptr;
    const NodeId src = g_.arg(a).id;
    if (g_.node(src).value != ValueKind::kTensor) return nullptr;
    auto ts = g_.tensors(src);
    return ts.empty() ? nullptr : &ts[0];
  }

  const Graph& g_;
  NodeId n_;
  std::vector<ArgId> positional_;
  std::vector<std::pair<ArgId, ArgId>> keywords_;
};

// ---------------------------------------------------------------------------
// The formulas, as in torch/utils/flop_counter.py, per release. Where torch's
// formula raises, remat raises what it does (TorchError: its exception type
// and text); where torch would fail on a malformed node in a way of its own
// (unpacking a shape of the wrong rank), remat's message names the node.

Count mul(const ArgReader& r, Count a, Count b) {
  Count out;
  if (__builtin_mul_overflow(a, b, &out)) r.fail("the flop count overflows 128 bits");
  return out;
}

Count product(const ArgReader& r, std::initializer_list<int64_t> xs) {
  Count p = 1;
  for (int64_t x : xs) p = mul(r, p, x);
  return p;
}

void expect_rank(const ArgReader& r, const Shape& s, size_t rank, std::string_view what) {
  if (s.size() != rank) {
    r.fail(fmt::format("'{}' has rank {}, expected {}", what, s.size(), rank));
  }
}

// How a shape reaches torch's formula, which its messages print: a tensor's
// torch.Size, or a tuple the formula built itself (the jagged unpacking).
enum class ShapeRepr { kTorchSize, kTuple };

std::string py_shape(const Shape& s, ShapeRepr how) {
  std::string items;
  for (size_t i = 0; i < s.size(); ++i) items += fmt::format("{}{}", i ? ", " : "", s[i]);
  if (how == ShapeRepr::kTorchSize) return fmt::format("torch.Size([{}])", items);
  return s.size() == 1 ? fmt::format("({},)", items) : fmt::format("({})", items);
}

// (m, k) @ (k, n): 2 m n k.
Count mm_count(const ArgReader& r, const Shape& a, const Shape& b) {
  expect_rank(r, a, 2, "mat1");
  expect_rank(r, b, 2, "mat2");
  if (a[1] != b[0]) {
    r.torch_raises("AssertionError", fmt::format("matmul: inner dimensions must match (k == k2), "
                                                 "got {} and {}", a[1], b[0]));
  }
  return product(r, {a[0], b[1], 2, a[1]});
}

// (b, m, k) @ (b, k, n): 2 b m n k.
Count bmm_count(const ArgReader& r, const Shape& a, const Shape& b) {
  expect_rank(r, a, 3, "batch1");
  expect_rank(r, b, 3, "batch2");
  if (a[0] != b[0]) {
    r.torch_raises("AssertionError", fmt::format("bmm: batch dimensions must match (b == b2), "
                                                 "got {} and {}", a[0], b[0]));
  }
  if (a[2] != b[1]) {
    r.torch_raises("AssertionError", fmt::format("bmm: inner dimensions must match (k == k2), "
                                                 "got {} and {}", a[2], b[1]));
  }
  return product(r, {a[0], a[1], b[2], 2, a[2]});
}

// Before 2.14, addmm_flop, bmm_flop and baddbmm_flop took `out_shape` as
// their next positional parameter, which FlopCounterMode also passes by
// keyword: an overload with one more positional argument (the .dtype ones'
// out_dtype) makes the call a TypeError, and the partition fails with it.
// 2.14 absorbs it in *args.
void check_extra_positional(const ArgReader& r, const TorchBehavior& torch, size_t shapes,
                            std::string_view formula) {
  if (!torch.flops_mm_family_extra_args && r.positional_count() > shapes) {
    r.torch_raises("TypeError",
                   fmt::format("{}() got multiple values for argument 'out_shape'", formula));
  }
}

// 2 * batch * c_out * c_in * prod(filter) * prod(spatial), where spatial is
// the input's for a transposed convolution and the output's otherwise.
Count conv_count(const ArgReader& r, const Shape& x, const Shape& w, const Shape& out,
                 bool transposed) {
  const Shape& spatial = transposed ? x : out;
  if (x.empty() || w.size() < 2) r.fail("convolution shapes have too few dimensions");
  Count c = product(r, {x[0], w[0], w[1], 2});
  for (size_t i = 2; i < spatial.size(); ++i) c = mul(r, c, spatial[i]);
  for (size_t i = 2; i < w.size(); ++i) c = mul(r, c, w[i]);
  return c;
}

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// One entry of a per-dimension parameter list (a single entry applies to all).
int64_t per_dim(const ArgReader& r, const std::vector<int64_t>& v, size_t i,
                std::string_view what) {
  if (v.size() == 1) return v[0];
  if (i < v.size()) return v[i];
  r.fail(fmt::format("'{}' has {} entries, fewer than the spatial dims", what, v.size()));
}

// The output shape a non-transposed convolution computes from its inputs
// (what torch's formula receives as out_shape after running the op).
Shape conv_output(const ArgReader& r, const Shape& x, const Shape& w, ArgId stride_a,
                  ArgId padding_a, ArgId dilation_a) {
  if (r.is_none(stride_a) || r.is_none(padding_a) || r.is_none(dilation_a)) {
    return r.output_shape();
  }
  const std::vector<int64_t> stride = r.ints(stride_a, "stride");
  const std::vector<int64_t> padding = r.ints(padding_a, "padding");
  const std::vector<int64_t> dilation = r.ints(dilation_a, "dilation");
  if (x.size() < 2 || w.size() != x.size()) r.fail("input and weight ranks differ");
  Shape out{x[0], w[0]};
  for (size_t i = 0; i + 2 < x.size(); ++i) {
    const int64_t s = per_dim(r, stride, i, "stride");
    if (s == 0) r.fail("stride is 0");
    const int64_t span = per_dim(r, dilation, i, "dilation") * (w[i + 2] - 1) + 1;
    out.push_back(floor_div(x[i + 2] + 2 * per_dim(r, padding, i, "padding") - span, s) + 1);
  }
  return out;
}

Count conv_forward(const ArgReader& r, bool cudnn) {
  const Shape x = r.shape(r.at(0, "input"), "input");
  const Shape w = r.shape(r.at(1, "weight"), "weight");
  // cudnn_convolution reaches torch's shared formula with its own argument
  // order: the formula's "transposed" is cudnn's `benchmark`.
  const bool transposed = cudnn ? r.truth(r.at(6, "benchmark"), "benchmark")
                                : r.truth(r.at(6, "transposed"), "transposed");
  if (transposed) return conv_count(r, x, w, {}, true);
  const Shape out = cudnn ? conv_output(r, x, w, r.at(3, "stride"), r.at(2, "padding"),
                                        r.at(4, "dilation"))
                          : conv_output(r, x, w, r.at(3, "stride"), r.at(4, "padding"),
                                        r.at(5, "dilation"));
  return conv_count(r, x, w, out, false);
}

// Swaps the first two dims (batch <-> channels).
Shape swap01(const ArgReader& r, const Shape& s) {
  if (s.size() < 2) r.fail("convolution_backward shapes have too few dimensions");
  Shape t = s;
  std::swap(t[0], t[1]);
  return t;
}

Count conv_backward(const ArgReader& r) {
  const Shape grad = r.shape(r.at(0, "grad_output"), "grad_output");
  const Shape x = r.shape(r.at(1, "input"), "input");
  const Shape w = r.shape(r.at(2, "weight"), "weight");
  const bool transposed = r.truth(r.at(7, "transposed"), "transposed");
  const std::vector<ArgId> mask = r.items(r.at(10, "output_mask"), "output_mask");
  if (mask.size() < 2) r.fail("output_mask has fewer than 2 entries");
  Count c = 0;
  // grad_input (shaped as input) is a convolution of the opposite kind.
  if (r.truth(mask[0], "output_mask")) c += conv_count(r, grad, w, x, !transposed);
  // grad_weight (shaped as weight) is a plain convolution over swapped dims.
  if (r.truth(mask[1], "output_mask")) {
    c += transposed ? conv_count(r, swap01(r, grad), swap01(r, x), swap01(r, w), false)
                    : conv_count(r, swap01(r, x), swap01(r, grad), swap01(r, w), false);
  }
  return c;
}

// From 2.12 on the key/value heads h_kv may divide the query heads h_q
// (grouped-query attention); the counts run over b * h_q batches.
void check_gqa_heads(const ArgReader& r, std::string_view formula, int64_t h_q, int64_t h_kv) {
  if (h_kv == 0) r.fail("key/value heads are 0");  // Python: ZeroDivisionError
  if (h_q < h_kv || h_q % h_kv != 0) {
    r.torch_raises("AssertionError",
                   fmt::format("{}: query heads ({}) must be a multiple of key/value heads ({})",
                               formula, h_q, h_kv));
  }
}

// q (b, h_q, s_q, d_q), k (b, h_kv, s_k, d_q), v (b, h_kv, s_k, d_v):
// scores = q @ k^T, out = scores @ v, over b * h_q batches.
Count sdpa_count(const ArgReader& r, const TorchBehavior& torch, const Shape& q, const Shape& k,
                 const Shape& v, ShapeRepr how) {
  expect_rank(r, q, 4, "query");
  expect_rank(r, k, 4, "key");
  expect_rank(r, v, 4, "value");
  const bool batch = q[0] == k[0] && k[0] == v[0];
  const bool dims = q[3] == k[3] && k[2] == v[2];
  if (torch.sdpa_flops_gqa) {
    if (!(batch && k[1] == v[1] && dims)) {
      r.torch_raises("AssertionError",
                     fmt::format("sdpa_flop_count: query/key/value shapes are incompatible: "
                                 "q={}, k={}, v={}",
                                 py_shape(q, how), py_shape(k, how), py_shape(v, how)));
    }
    check_gqa_heads(r, "sdpa_flop_count", q[1], k[1]);
  } else if (!(batch && q[1] == k[1] && k[1] == v[1] && dims)) {
    // 2.11: one head count for all three.
    r.torch_raises("AssertionError", "sdpa_flop_count: query/key/value shapes are incompatible");
  }
  const int64_t bh = q[0] * q[1], s_q = q[2], d_q = q[3], s_k = k[2], d_v = v[3];
  return product(r, {bh, s_q, s_k, 2, d_q}) + product(r, {bh, s_q, d_v, 2, s_k});
}

// Recomputes the scores, then the gradients of both matmuls.
Count sdpa_backward_count(const ArgReader& r, const TorchBehavior& torch, const Shape& go,
                          const Shape& q, const Shape& k, const Shape& v) {
  expect_rank(r, q, 4, "query");
  expect_rank(r, k, 4, "key");
  expect_rank(r, v, 4, "value");
  expect_rank(r, go, 4, "grad_out");
  constexpr std::string_view kFormula = "sdpa_backward_flop_count";
  const bool batch = q[0] == k[0] && k[0] == v[0] && v[0] == go[0];
  const bool sizes = v[3] == go[3] && k[2] == v[2] && q[2] == go[2];
  if (torch.sdpa_flops_gqa) {
    if (!(batch && k[1] == v[1] && q[1] == go[1])) {
      r.torch_raises("AssertionError", fmt::format("{}: batch/heads mismatch among tensors", kFormula));
    }
    check_gqa_heads(r, kFormula, q[1], k[1]);
    if (!(q[3] == k[3] && sizes)) {
      r.torch_raises("AssertionError",
                     fmt::format("{}: grad_out/value/key/query shapes are incompatible", kFormula));
    }
  } else {
    // 2.11: one head count for all four, and its own texts.
    if (!(batch && q[1] == k[1] && k[1] == v[1] && v[1] == go[1] && q[3] == k[3])) {
      r.torch_raises("AssertionError",
                     fmt::format("{}: batch/heads/dimension mismatch among tensors", kFormula));
    }
    if (!sizes) {
      r.torch_raises("AssertionError",
                     fmt::format("{}: grad_out/value/key/query shapes are incompatible", kFormula));
    }
  }
  const int64_t bh = q[0] * q[1], s_q = q[2], d_q = q[3], s_k = k[2], d_v = v[3];
  return product(r, {bh, s_q, s_k, 2, d_q})    // scores = q @ k^T
         + product(r, {bh, s_q, s_k, 2, d_v})  // grad_scores = grad_out @ v^T
         + product(r, {bh, s_k, d_v, 2, s_q})  // grad_v = scores^T @ grad_out
         + product(r, {bh, s_q, d_q, 2, s_k})  // grad_q = grad_scores @ k
         + product(r, {bh, d_q, s_k, 2, s_q}); // grad_k = q^T @ grad_scores
}

// The fused attention kernels. With offsets (a jagged batch), torch cannot
// read fake offsets and counts every sequence at the max length: the shapes
// become (1, heads, max_len, dim) once per sequence.
struct FusedAttentionArgs {
  size_t grad_out = SIZE_MAX, query, key, value, cu_q, cu_k, max_q, max_k;
  bool efficient;  // (batch, seq, heads, dim), jagged or not; flash: (total, heads, dim) jagged
};

// Swaps dims -2 and -3 (Tensor.transpose(-2, -3)).
Shape transpose23(const ArgReader& r, const Shape& s) {
  if (s.size() < 3) r.fail("an attention input has fewer than 3 dimensions");
  Shape t = s;
  std::swap(t[t.size() - 2], t[t.size() - 3]);
  return t;
}

Count fused_attention(const ArgReader& r, const TorchBehavior& torch,
                      const FusedAttentionArgs& a) {
  static constexpr const char* kNames[] = {"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                           "max_seqlen_k"};
  const bool backward = a.grad_out != SIZE_MAX;
  Shape q = r.shape(r.at(a.query, "query"), "query");
  Shape k = r.shape(r.at(a.key, "key"), "key");
  Shape v = r.shape(r.at(a.value, "value"), "value");
  Shape go = backward ? r.shape(r.at(a.grad_out, "grad_out"), "grad_out") : Shape{};
  const ArgId cu_q = r.at(a.cu_q, kNames[0]);
  if (r.is_none(cu_q)) {
    // The raw flash kernels take (batch, seq, heads, dim); 2.14 on reads
    // them so, before they were read as (batch, heads, seq, dim).
    if (!a.efficient && torch.flops_flash_attention_bshd && q.size() == 4) {
      q = transpose23(r, q);
      k = transpose23(r, k);
      v = transpose23(r, v);
      if (backward) go = transpose23(r, go);
    }
    return backward ? sdpa_backward_count(r, torch, go, q, k, v)
                    : sdpa_count(r, torch, q, k, v, ShapeRepr::kTorchSize);
  }
  // _unpack_{flash,efficient}_attention_nested_shapes.
  const std::string_view prefix =
      a.efficient ? "_unpack_efficient_attention_nested_shapes" : "sdpa_flop_count";
  const size_t rank = a.efficient ? 4 : 3;
  for (auto [s, name] : {std::pair{&k, "key"}, std::pair{&v, "value"}}) {
    if (s->size() != rank) {
      r.torch_raises("AssertionError", fmt::format("{}: expected {}.shape to be {}-dimensional",
                                                   prefix, name, rank));
    }
  }
  expect_rank(r, q, rank, "query");
  const size_t h = rank - 2, d = rank - 1;
  if (backward) {
    if (torch.flops_nested_attention_dv) {
      // 2.15: grad_out is shaped as the output, with the value head size.
      Shape expected = q;
      expected[d] = v[d];
      if (go != expected) {
        r.torch_raises("AssertionError",
                       fmt::format("{}: grad_out has shape {}, expected {}", prefix,
                                   py_shape(go, ShapeRepr::kTuple),
                                   py_shape(expected, ShapeRepr::kTuple)));
      }
    } else if (go != q) {
      r.torch_raises("AssertionError",
                     fmt::format("{}: grad_out.shape must match query.shape when provided", prefix));
    }
  }
  const Shape cq = r.shape(cu_q, kNames[0]);
  const Shape ck = r.shape(r.at(a.cu_k, kNames[1]), kNames[1]);
  if (cq != ck) {
    r.torch_raises("AssertionError",
                   a.efficient ? fmt::format("{}: cu_seqlens_q and cu_seqlens_k must have the same "
                                             "shape", prefix)
                               : fmt::format("{}: cum_seq_q and cum_seq_k must have the same shape",
                                             prefix));
  }
  const int64_t sequences = cq.empty() ? 0 : cq[0] - 1;
  if (sequences <= 0) return 0;
  const int64_t max_q = r.integer(r.at(a.max_q, kNames[2]), kNames[2]);
  const int64_t max_k = r.integer(r.at(a.max_k, kNames[3]), kNames[3]);
  const Shape q1{1, q[h], max_q, q[d]}, k1{1, k[h], max_k, k[d]}, v1{1, v[h], max_k, v[d]};
  // Before 2.15 the per-sequence grad_out is taken as the query's shape.
  const Shape go1 = torch.flops_nested_attention_dv ? Shape{1, q[h], max_q, v[d]} : q1;
  const Count one = backward ? sdpa_backward_count(r, torch, go1, q1, k1, v1)
                             : sdpa_count(r, torch, q1, k1, v1, ShapeRepr::kTuple);
  return mul(r, one, sequences);
}

// flex_attention's formulas: the SDPA counts of its query, key and value
// (the sparsity hint they scale by comes from a kwarg estimate_runtime never
// passes); the backward's grad_out falls back to the output.
Count flex_attention(const ArgReader& r, const TorchBehavior& torch, bool backward) {
  const Shape q = r.shape(r.at(0, "query"), "query");
  const Shape k = r.shape(r.at(1, "key"), "key");
  const Shape v = r.shape(r.at(2, "value"), "value");
  if (!backward) return sdpa_count(r, torch, q, k, v, ShapeRepr::kTorchSize);
  const ArgId grad_out = r.at(5, "grad_out");
  const Shape go = r.is_none(grad_out) ? r.shape(r.at(3, "out"), "out") : r.shape(grad_out, "grad_out");
  return sdpa_backward_count(r, torch, go, q, k, v);
}

// Before 2.15, FlopCounterMode runs no HOP but triton kernels and cond:
// flex_attention, registered or not, is a TypeError out of the dispatch
// (torch's text goes on to name the mode stack, which remat cannot know).
void hop_formula_missing(const ArgReader& r, const Graph& g, NodeId n, const TorchBehavior& torch) {
  const OpInfo* op = g.op(n);
  if (op == nullptr || op->kind != OpKind::kHigherOrder) return;
  const FormulaEntry* e = find_formula(g.str(op->name));
  if (e == nullptr || registered_in(*e, torch)) return;
  const std::string_view name = g.str(op->name).substr(std::string_view("higher_order.").size());
  r.torch_raises("TypeError",
                 fmt::format("no implementation found for 'torch.ops.higher_order.{}' on types "
                             "that implement __torch_function__: []",
                             name));
}

Count count_node(const Graph& g, NodeId n, Formula f, const TorchBehavior& torch) {
  const ArgReader r(g, n);
  auto shape = [&](size_t pos, std::string_view name) { return r.shape(r.at(pos, name), name); };
  switch (f) {
    case Formula::kNone: hop_formula_missing(r, g, n, torch); return 0;
    case Formula::kMm: return mm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kAddmm:
      check_extra_positional(r, torch, 3, "addmm_flop");
      return mm_count(r, shape(1, "mat1"), shape(2, "mat2"));
    case Formula::kScaledMm: return mm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kBmm:
      check_extra_positional(r, torch, 2, "bmm_flop");
      return bmm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kBaddbmm:
      check_extra_positional(r, torch, 3, "baddbmm_flop");
      return bmm_count(r, shape(1, "batch1"), shape(2, "batch2"));
    case Formula::kConv: return conv_forward(r, /*cudnn=*/false);
    case Formula::kCudnnConv: return conv_forward(r, /*cudnn=*/true);
    case Formula::kConvBackward: return conv_backward(r);
    case Formula::kSdpa:
      return sdpa_count(r, torch, shape(0, "query"), shape(1, "key"), shape(2, "value"),
                        ShapeRepr::kTorchSize);
    case Formula::kSdpaBackward:
      return sdpa_backward_count(r, torch, shape(0, "grad_out"), shape(1, "query"),
                                 shape(2, "key"), shape(3, "value"));
    case Formula::kFlashForward:
      return fused_attention(r, torch, {SIZE_MAX, 0, 1, 2, 3, 4, 5, 6, false});
    case Formula::kEfficientForward:
      return fused_attention(r, torch, {SIZE_MAX, 0, 1, 2, 4, 5, 6, 7, true});
    case Formula::kFlashBackward:
      return fused_attention(r, torch, {0, 1, 2, 3, 6, 7, 8, 9, false});
    case Formula::kEfficientBackward:
      return fused_attention(r, torch, {0, 1, 2, 3, 6, 7, 8, 9, true});
    case Formula::kFlexForward: return flex_attention(r, torch, /*backward=*/false);
    case Formula::kFlexBackward: return flex_attention(r, torch, /*backward=*/true);
  }
  return 0;
}

// estimate_runtime's materialize_arg reads meta["val"] of every node among
// the arguments (through lists, tuples and dicts) before anything runs: a
// node without one (a HOP body's get_attr) is torch's KeyError, in every
// release.
void check_materializable(const Graph& g, NodeId n) {
  std::vector<ArgId> stack;
  const Node& node = g.node(n);
  for (ArgId root : {node.args, node.kwargs}) {
    if (root != kNoArg) stack.push_back(root);
  }
  while (!stack.empty()) {
    const ArgId a = stack.back();
    stack.pop_back();
    const Arg& arg = g.arg(a);
    if (arg.kind == ArgKind::kNode) {
      if (g.node(arg.id).value == ValueKind::kMissing) {
        const OpInfo* op = g.op(n);
        throw TorchError(ErrorCode::kInvalidGraph, "KeyError", "val",
                         fmt::format("node '{}' ({}): its argument '{}' has no val metadata, which "
                                     "torch's estimate_runtime reads",
                                     g.name(n), op ? g.str(op->name) : "?", g.name(arg.id)));
      }
    } else if (arg.kind == ArgKind::kList || arg.kind == ArgKind::kTuple ||
               arg.kind == ArgKind::kDict) {
      const std::vector<ArgId> children = g.children(a);
      stack.insert(stack.end(), children.rbegin(), children.rend());
    }
  }
}
// ---------------------------------------------------------------------------

struct CustomEstimators {
  std::mutex mu;
  std::map<std::string, RuntimeEstimator, std::less<>> by_name;
};

CustomEstimators& custom_estimators() {
  static CustomEstimators registry;
  return registry;
}

bool is_builtin_estimator(std::string_view name) {
  return name == "flops" || name == "testing" || name == "profile";
}

RuntimeEstimator find_custom(std::string_view name) {
  CustomEstimators& r = custom_estimators();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_name.find(name);
  if (it == r.by_name.end()) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("activation_memory_budget_runtime_estimator: unknown runtime "
                            "estimator '{}' (known: flops, testing, profile, or a registered "
                            "custom estimator)",
                            name));
  }
  return it->second;
}

double profiled_runtime(const Graph& g, NodeId n, std::span<const double> profiled) {
  if (profiled.size() != g.size()) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("runtime estimator 'profile' needs one measured runtime per node "
                            "({} nodes, {} runtimes given)",
                            g.size(), profiled.size()));
  }
  return profiled[n];
}

}  // namespace

double count_flops(const Graph& g, NodeId n, const TorchBehavior& torch) {
  return static_cast<double>(count_node(g, n, formula_of(g, n, torch), torch));
}

bool has_flop_formula(std::string_view key, const TorchBehavior& torch) {
  const FormulaEntry* e = find_formula(key);
  return e != nullptr && registered_in(*e, torch);
}

void register_runtime_estimator(const std::string& name, RuntimeEstimator estimator) {
  // "custom" names PartitionOptions::custom_runtime_estimator (choose.cc).
  if (is_builtin_estimator(name) || name == "custom") {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("runtime estimator '{}' is built in or reserved and cannot be replaced", name));
  }
  if (!estimator) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("runtime estimator '{}': empty function", name));
  }
  CustomEstimators& r = custom_estimators();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_name[name] = std::move(estimator);
}

bool has_runtime_estimator(std::string_view name) {
  if (is_builtin_estimator(name)) return true;
  CustomEstimators& r = custom_estimators();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.by_name.find(name) != r.by_name.end();
}

std::vector<std::string> runtime_estimator_names() {
  std::vector<std::string> names = {"flops", "testing", "profile"};
  CustomEstimators& r = custom_estimators();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [name, estimator] : r.by_name) names.push_back(name);
  return names;
}

double estimate_runtime(const Graph& g, NodeId n, std::string_view estimator,
                        const TorchBehavior& torch, std::span<const double> profiled) {
  if (estimator == "flops") {
    check_materializable(g, n);
    return std::max(count_flops(g, n, torch), 1.0);
  }
  if (estimator == "testing") return 1.0;
  if (estimator == "profile") return profiled_runtime(g, n, profiled);
  return find_custom(estimator)(g, n);
}

std::vector<double> estimate_runtimes(const Graph& g, std::span<const NodeId> nodes,
                                      std::string_view estimator, const TorchBehavior& torch,
                                      std::span<const double> profiled) {
  std::vector<double> out;
  out.reserve(nodes.size());
  if (estimator == "flops" || estimator == "testing" || estimator == "profile") {
    for (NodeId n : nodes) out.push_back(estimate_runtime(g, n, estimator, torch, profiled));
    return out;
  }
  const RuntimeEstimator custom = find_custom(estimator);  // one lookup for all nodes
  for (NodeId n : nodes) out.push_back(custom(g, n));
  return out;
}

}  // namespace remat
