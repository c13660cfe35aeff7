// rewrite/value_meta.cc — see value_meta.h. The stride rules follow
// TensorIterator (c10 / ATen) and torch._prims_common's
// compute_elementwise_output_strides, which agree on every case a rewrite
// builds.
#include "rewrite/value_meta.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "remat/error.h"

namespace remat {
namespace {

Dim constant(int64_t v) {
  Dim d;
  d.value = v;
  return d;
}

// An expression as a factor of a product: parenthesized unless it already
// binds tighter than '*'.
std::string factor(const StringPool& strings, const Dim& d) {
  if (d.expr == 0) return std::to_string(d.value);
  std::string_view e = strings.view(d.expr);
  int depth = 0;
  for (char c : e) {
    if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if (depth == 0 && (c == '+' || c == '-' || c == ' ' || c == '/')) {
      return fmt::format("({})", e);
    }
  }
  return std::string(e);
}

// a * b, constants folded, a numeric coefficient printed first as sympy does.
Dim product(StringPool& strings, const Dim& a, const Dim& b) {
  if (a.expr == 0 && a.value == 1) return b;
  if (b.expr == 0 && b.value == 1) return a;
  Dim out;
  out.value = a.value * b.value;
  out.has_hint = a.has_hint && b.has_hint;
  if (a.expr == 0 && b.expr == 0) return out;
  const Dim& first = a.expr == 0 ? a : (b.expr == 0 ? b : a);
  const Dim& second = &first == &a ? b : a;
  out.expr = strings.intern(factor(strings, first) + "*" + factor(strings, second));
  return out;
}

// Sizes of 0 count as 1 in stride products (make_contiguous_strides_for).
Dim at_least_one(const Dim& d) { return d.expr == 0 && d.value == 0 ? constant(1) : d; }

std::vector<Dim> contiguous_strides(StringPool& strings, const std::vector<Dim>& shape) {
  std::vector<Dim> stride(shape.size());
  Dim next = constant(1);
  for (size_t i = shape.size(); i-- > 0;) {
    stride[i] = next;
    next = product(strings, next, at_least_one(shape[i]));
  }
  return stride;
}

int64_t numel(const std::vector<Dim>& shape) {
  int64_t n = 1;
  for (const Dim& d : shape) n *= d.value;
  return n;
}

// c10's is_contiguous (default memory format), on hints.
bool is_contiguous(const std::vector<Dim>& shape, const std::vector<Dim>& stride) {
  if (numel(shape) == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i].value == 1) continue;
    if (stride[i].value != expected) return false;
    expected *= shape[i].value;
  }
  return true;
}

// c10's compute_non_overlapping_and_dense, on hints.
bool is_non_overlapping_and_dense(const std::vector<Dim>& shape, const std::vector<Dim>& stride) {
  const size_t n = shape.size();
  if (n == 1) return shape[0].value < 2 || stride[0].value == 1;
  std::vector<size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (shape[a].value < 2) return false;
    if (shape[b].value < 2) return true;
    return stride[a].value < stride[b].value;
  });
  int64_t expected = 1;
  for (size_t i : perm) {
    if (shape[i].value < 2) return true;
    if (stride[i].value != expected) return false;
    expected *= shape[i].value;
  }
  return true;
}

// The strides of `x` broadcast to `shape` (a broadcast dimension strides 0).
std::vector<int64_t> broadcast_strides(const TensorValue& x, const std::vector<Dim>& shape) {
  std::vector<int64_t> out(shape.size(), 0);
  const size_t offset = shape.size() - x.shape.size();
  for (size_t i = 0; i < x.shape.size(); ++i) {
    const bool broadcast = x.shape[i].value == 1 && shape[offset + i].value != 1;
    out[offset + i] = broadcast ? 0 : x.stride[i].value;
  }
  return out;
}

// compute_elementwise_output_logical_to_physical_perm's sort: dimensions from
// outermost to innermost.
std::vector<size_t> physical_order(const std::vector<Dim>& shape,
                                   const std::vector<std::vector<int64_t>>& strides) {
  const size_t n = shape.size();
  // torch's should_swap answers -1 (a stays inside b: stop), 1 (swap) or 0
  // (no stride decides: look further out).
  enum class Order { kKeep, kSwap, kUndecided };
  auto should_swap = [&](size_t a, size_t b) {
    for (const std::vector<int64_t>& s : strides) {
      if (s[a] == 0 || s[b] == 0) continue;
      if (s[a] < s[b]) return Order::kKeep;
      if (s[a] > s[b]) return Order::kSwap;
      if (shape[a].value > shape[b].value) return Order::kSwap;
    }
    return Order::kUndecided;
  };
  std::vector<size_t> perm(n);  // innermost first while sorting
  for (size_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  for (size_t i = 1; i < n; ++i) {
    size_t dim1 = i;
    for (size_t dim0 = i; dim0-- > 0;) {
      const Order c = should_swap(perm[dim0], perm[dim1]);
      if (c == Order::kSwap) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c == Order::kKeep) {
        break;
      }
    }
  }
  std::reverse(perm.begin(), perm.end());
  return perm;
}

// Contiguous in the given physical order.
std::vector<Dim> strides_in_order(StringPool& strings, const std::vector<Dim>& shape,
                                  const std::vector<size_t>& outer_to_inner) {
  std::vector<Dim> stride(shape.size());
  Dim next = constant(1);
  for (size_t k = outer_to_inner.size(); k-- > 0;) {
    const size_t d = outer_to_inner[k];
    stride[d] = next;
    next = product(strings, next, at_least_one(shape[d]));
  }
  return stride;
}

// broadcast_shapes, on hints: a size-1 dim takes the other operand's.
std::vector<Dim> broadcast_shape(std::span<const TensorValue* const> operands) {
  size_t rank = 0;
  for (const TensorValue* t : operands) rank = std::max(rank, t->shape.size());
  std::vector<Dim> shape(rank, constant(1));
  for (const TensorValue* t : operands) {
    const size_t offset = rank - t->shape.size();
    for (size_t i = 0; i < t->shape.size(); ++i) {
      Dim& out = shape[offset + i];
      const Dim& d = t->shape[i];
      if (out.expr == 0 && out.value == 1) {
        out = d;
      } else if (!(d.expr == 0 && d.value == 1) && d.value != out.value) {
        throw Error(ErrorCode::kInternal,
                    "value_meta: operands of a pointwise op do not broadcast");
      }
    }
  }
  return shape;
}

}  // namespace

TensorValue tensor_value(const Graph& g, NodeId id) {
  const std::span<const TensorMeta> ts = g.tensors(id);
  if (g.node(id).value != ValueKind::kTensor || ts.empty()) {
    throw Error(ErrorCode::kInternal,
                fmt::format("value_meta: node '{}' has no tensor value", g.name(id)));
  }
  const TensorMeta& t = ts[0];
  TensorValue v;
  v.dtype = t.dtype;
  v.itemsize = t.itemsize;
  v.device = t.device;
  const std::span<const Dim> shape = g.shape(t);
  v.shape.assign(shape.begin(), shape.end());
  if (t.has_stride) {
    const std::span<const Dim> stride = g.stride(t);
    v.stride.assign(stride.begin(), stride.end());
  } else {
    v.stride = contiguous_strides(*g.shared_strings(), v.shape);
  }
  const std::span<const StrId> symbols = g.free_symbols(id);
  v.symbol_candidates.assign(symbols.begin(), symbols.end());
  return v;
}

TensorValue pointwise(StringPool& strings, std::span<const TensorValue* const> operands,
                      StrId dtype, uint16_t itemsize) {
  TensorValue out;
  out.dtype = dtype;
  out.itemsize = itemsize;
  out.device = operands[0]->device;
  for (const TensorValue* t : operands) {
    out.symbol_candidates.insert(out.symbol_candidates.end(), t->symbol_candidates.begin(),
                                 t->symbol_candidates.end());
  }
  out.shape = broadcast_shape(operands);
  if (operands.size() == 1 &&
      is_non_overlapping_and_dense(operands[0]->shape, operands[0]->stride)) {
    out.stride = operands[0]->stride;
    return out;
  }
  bool all_contiguous = true;
  for (const TensorValue* t : operands) all_contiguous &= is_contiguous(t->shape, t->stride);
  if (all_contiguous || out.shape.size() <= 1) {
    out.stride = contiguous_strides(strings, out.shape);
    return out;
  }
  std::vector<std::vector<int64_t>> strides;
  for (const TensorValue* t : operands) strides.push_back(broadcast_strides(*t, out.shape));
  out.stride = strides_in_order(strings, out.shape, physical_order(out.shape, strides));
  // Where the result equals the first operand's layout, keep its expressions.
  const TensorValue& first = *operands[0];
  if (first.shape.size() == out.shape.size()) {
    for (size_t i = 0; i < out.stride.size(); ++i) {
      if (out.stride[i].value == first.stride[i].value && out.stride[i].expr != 0 &&
          first.stride[i].expr != 0) {
        out.stride[i] = first.stride[i];
      }
    }
  }
  return out;
}

TensorValue amax_keepdim_last(StringPool& strings, const TensorValue& x) {
  TensorValue out;
  out.dtype = x.dtype;
  out.itemsize = x.itemsize;
  out.device = x.device;
  out.symbol_candidates = x.symbol_candidates;
  out.shape = x.shape;
  if (!out.shape.empty()) out.shape.back() = constant(1);
  out.stride = contiguous_strides(strings, out.shape);
  return out;
}

void set_tensor_value(GraphBuilder& b, const StringPool& strings, Node& n, const TensorValue& v,
                      int64_t storage) {
  TensorMeta t;
  t.dtype = v.dtype;
  t.itemsize = v.itemsize;
  t.device = v.device;
  t.shape_begin = static_cast<uint32_t>(b.dim_count());
  bool hinted = true;
  int64_t numel = 1;
  for (const Dim& d : v.shape) {
    b.add_dim(d);
    hinted &= d.has_hint;
    numel *= d.value;
  }
  t.rank = static_cast<uint32_t>(v.shape.size());
  t.stride_begin = static_cast<uint32_t>(b.dim_count());
  for (const Dim& d : v.stride) b.add_dim(d);
  t.has_stride = true;
  t.numel_hint = hinted ? numel : 4096;  // torch's fallback for unhinted sizes
  t.storage = storage;
  n.value = ValueKind::kTensor;
  n.flags |= kFlagTensorMeta;
  n.tensors_begin = b.add_tensor(t);
  n.tensors_count = 1;
  // Free symbols: the candidates some dim's expression mentions, by name.
  std::vector<StrId> symbols;
  for (StrId s : v.symbol_candidates) {
    const std::string_view name = strings.view(s);
    auto mentions = [&](const Dim& d) {
      if (d.expr == 0) return false;
      const std::string_view e = strings.view(d.expr);
      for (size_t at = e.find(name); at != std::string_view::npos; at = e.find(name, at + 1)) {
        auto ident = [](char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); };
        const bool starts = at == 0 || !ident(e[at - 1]);
        const bool ends = at + name.size() == e.size() || !ident(e[at + name.size()]);
        if (starts && ends) return true;
      }
      return false;
    };
    if (std::any_of(v.shape.begin(), v.shape.end(), mentions) ||
        std::any_of(v.stride.begin(), v.stride.end(), mentions)) {
      symbols.push_back(s);
    }
  }
  std::sort(symbols.begin(), symbols.end(),
            [&](StrId a, StrId c) { return strings.view(a) < strings.view(c); });
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
  n.symbols_begin = static_cast<uint32_t>(b.symbol_count());
  n.symbols_count = static_cast<uint32_t>(symbols.size());
  for (StrId s : symbols) b.add_symbol(s);
}

int64_t fresh_storage(std::span<const Graph* const> graphs) {
  int64_t m = -1;
  for (const Graph* g : graphs) {
    for (NodeId id = 0; id < g->size(); ++id) {
      for (const TensorMeta& t : g->tensors(id)) m = std::max(m, t.storage);
    }
  }
  return m + 1;
}

}  // namespace remat
