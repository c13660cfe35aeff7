// budget/flops.cc — FlopCounterMode's formulas over the IR, and the runtime
// estimators built on them.
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
};

const std::map<std::string_view, Formula>& formula_table() {
  static const std::map<std::string_view, Formula> table = {
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
  };
  return table;
}

Formula formula_of(const Graph& g, NodeId n) {
  const OpInfo* op = g.op(n);
  if (op == nullptr || op->kind != OpKind::kOverload) return Formula::kNone;
  auto it = formula_table().find(g.str(op->packet));
  return it == formula_table().end() ? Formula::kNone : it->second;
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
    const OpInfo* op = g_.op(n_);
    throw Error(ErrorCode::kInvalidGraph,
                fmt::format("node '{}' ({}): flop formula: {}", g_.name(n_),
                            op ? g_.str(op->name) : "?", msg));
  }

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
// The formulas, as in torch/utils/flop_counter.py.

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

// (m, k) @ (k, n): 2 m n k.
Count mm_count(const ArgReader& r, const Shape& a, const Shape& b) {
  expect_rank(r, a, 2, "mat1");
  expect_rank(r, b, 2, "mat2");
  if (a[1] != b[0]) r.fail(fmt::format("inner dimensions differ: {} and {}", a[1], b[0]));
  return product(r, {a[0], b[1], 2, a[1]});
}

// (b, m, k) @ (b, k, n): 2 b m n k.
Count bmm_count(const ArgReader& r, const Shape& a, const Shape& b) {
  expect_rank(r, a, 3, "batch1");
  expect_rank(r, b, 3, "batch2");
  if (a[0] != b[0]) r.fail(fmt::format("batch dimensions differ: {} and {}", a[0], b[0]));
  if (a[2] != b[1]) r.fail(fmt::format("inner dimensions differ: {} and {}", a[2], b[1]));
  return product(r, {a[0], a[1], b[2], 2, a[2]});
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

void check_heads(const ArgReader& r, int64_t h_q, int64_t h_kv) {
  if (h_q < h_kv || h_kv == 0 || h_q % h_kv != 0) {
    r.fail(fmt::format("query heads ({}) must be a multiple of key/value heads ({})", h_q,
                       h_kv));
  }
}

// q (b, h_q, s_q, d_q), k (b, h_kv, s_k, d_q), v (b, h_kv, s_k, d_v):
// scores = q @ k^T, out = scores @ v, over b * h_q batches.
Count sdpa_count(const ArgReader& r, const Shape& q, const Shape& k, const Shape& v) {
  expect_rank(r, q, 4, "query");
  expect_rank(r, k, 4, "key");
  expect_rank(r, v, 4, "value");
  if (!(q[0] == k[0] && k[0] == v[0] && k[1] == v[1] && q[3] == k[3] && k[2] == v[2])) {
    r.fail("query/key/value shapes are incompatible");
  }
  check_heads(r, q[1], k[1]);
  const int64_t bh = q[0] * q[1], s_q = q[2], d_q = q[3], s_k = k[2], d_v = v[3];
  return product(r, {bh, s_q, s_k, 2, d_q}) + product(r, {bh, s_q, d_v, 2, s_k});
}

// Recomputes the scores, then the gradients of both matmuls.
Count sdpa_backward_count(const ArgReader& r, const Shape& go, const Shape& q, const Shape& k,
                          const Shape& v) {
  expect_rank(r, q, 4, "query");
  expect_rank(r, k, 4, "key");
  expect_rank(r, v, 4, "value");
  expect_rank(r, go, 4, "grad_out");
  if (!(q[0] == k[0] && k[0] == v[0] && v[0] == go[0] && k[1] == v[1] && q[1] == go[1])) {
    r.fail("batch/heads mismatch among tensors");
  }
  check_heads(r, q[1], k[1]);
  if (!(q[3] == k[3] && v[3] == go[3] && k[2] == v[2] && q[2] == go[2])) {
    r.fail("grad_out/value/key/query shapes are incompatible");
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
  bool heads_last;  // efficient attention: (batch, seq, heads, dim)
};

Count fused_attention(const ArgReader& r, const FusedAttentionArgs& a) {
  static constexpr const char* kNames[] = {"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                           "max_seqlen_k"};
  const bool backward = a.grad_out != SIZE_MAX;
  Shape q = r.shape(r.at(a.query, "query"), "query");
  Shape k = r.shape(r.at(a.key, "key"), "key");
  Shape v = r.shape(r.at(a.value, "value"), "value");
  Shape go = backward ? r.shape(r.at(a.grad_out, "grad_out"), "grad_out") : Shape{};
  const ArgId cu_q = r.at(a.cu_q, kNames[0]);
  if (r.is_none(cu_q)) {
    return backward ? sdpa_backward_count(r, go, q, k, v) : sdpa_count(r, q, k, v);
  }
  const size_t rank = a.heads_last ? 4 : 3;
  expect_rank(r, q, rank, "query");
  expect_rank(r, k, rank, "key");
  expect_rank(r, v, rank, "value");
  if (backward && go != q) r.fail("grad_out.shape must match query.shape");
  const Shape cq = r.shape(cu_q, kNames[0]);
  const Shape ck = r.shape(r.at(a.cu_k, kNames[1]), kNames[1]);
  if (cq != ck) r.fail("the query and key offsets have different shapes");
  const int64_t sequences = cq.empty() ? 0 : cq[0] - 1;
  if (sequences <= 0) return 0;
  const int64_t max_q = r.integer(r.at(a.max_q, kNames[2]), kNames[2]);
  const int64_t max_k = r.integer(r.at(a.max_k, kNames[3]), kNames[3]);
  const size_t h = rank - 2, d = rank - 1;
  const Shape q1{1, q[h], max_q, q[d]}, k1{1, k[h], max_k, k[d]}, v1{1, v[h], max_k, v[d]};
  const Count one = backward ? sdpa_backward_count(r, q1, q1, k1, v1) : sdpa_count(r, q1, k1, v1);
  return mul(r, one, sequences);
}

Count count_node(const Graph& g, NodeId n, Formula f) {
  const ArgReader r(g, n);
  auto shape = [&](size_t pos, std::string_view name) { return r.shape(r.at(pos, name), name); };
  switch (f) {
    case Formula::kNone: return 0;
    case Formula::kMm: return mm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kAddmm: return mm_count(r, shape(1, "mat1"), shape(2, "mat2"));
    case Formula::kScaledMm: return mm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kBmm: return bmm_count(r, shape(0, "self"), shape(1, "mat2"));
    case Formula::kBaddbmm: return bmm_count(r, shape(1, "batch1"), shape(2, "batch2"));
    case Formula::kConv: return conv_forward(r, /*cudnn=*/false);
    case Formula::kCudnnConv: return conv_forward(r, /*cudnn=*/true);
    case Formula::kConvBackward: return conv_backward(r);
    case Formula::kSdpa:
      return sdpa_count(r, shape(0, "query"), shape(1, "key"), shape(2, "value"));
    case Formula::kSdpaBackward:
      return sdpa_backward_count(r, shape(0, "grad_out"), shape(1, "query"), shape(2, "key"),
                                 shape(3, "value"));
    case Formula::kFlashForward:
      return fused_attention(r, {SIZE_MAX, 0, 1, 2, 3, 4, 5, 6, false});
    case Formula::kEfficientForward:
      return fused_attention(r, {SIZE_MAX, 0, 1, 2, 4, 5, 6, 7, true});
    case Formula::kFlashBackward:
      return fused_attention(r, {0, 1, 2, 3, 6, 7, 8, 9, false});
    case Formula::kEfficientBackward:
      return fused_attention(r, {0, 1, 2, 3, 6, 7, 8, 9, true});
  }
  return 0;
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

double count_flops(const Graph& g, NodeId n) {
  return static_cast<double>(count_node(g, n, formula_of(g, n)));
}

bool has_flop_formula(std::string_view packet) {
  return formula_table().count(packet) != 0;
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
                        std::span<const double> profiled) {
  if (estimator == "flops") return std::max(count_flops(g, n), 1.0);
  if (estimator == "testing") return 1.0;
  if (estimator == "profile") return profiled_runtime(g, n, profiled);
  return find_custom(estimator)(g, n);
}

std::vector<double> estimate_runtimes(const Graph& g, std::span<const NodeId> nodes,
                                      std::string_view estimator,
                                      std::span<const double> profiled) {
  std::vector<double> out;
  out.reserve(nodes.size());
  if (estimator == "flops" || estimator == "testing" || estimator == "profile") {
    for (NodeId n : nodes) out.push_back(estimate_runtime(g, n, estimator, profiled));
    return out;
  }
  const RuntimeEstimator custom = find_custom(estimator);  // one lookup for all nodes
  for (NodeId n : nodes) out.push_back(custom(g, n));
  return out;
}

}  // namespace remat
