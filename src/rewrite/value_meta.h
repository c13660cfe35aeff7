// rewrite/value_meta.h — the value metadata of nodes a rewrite creates, as
// torch's fake tensors would compute it for the same op.
//
// Contract: each function returns the dtype, shape and strides that running
// the op under torch 2.13's FakeTensorMode gives (the meta["val"] torch's own
// rewrites attach), for dense and strided inputs alike:
//  * pointwise: one tensor operand (scalars are no operands: abs, clamp_min /
//    clamp_max / mul with a Python number, reciprocal,
//    prims.convert_element_type) or two broadcast together (mul, div). A
//    non-overlapping-and-dense single input keeps its strides; operands that
//    are all contiguous give a contiguous result; otherwise the result is
//    contiguous in the dimension order TensorIterator's stride sort gives
//    (ties broken by size, broadcast dimensions ignored).
//  * amax_keepdim_last: amax(x, [-1], keepdim=True), contiguous.
// Symbolic dims compare by their hints. A result dim that equals an input
// dim reuses it, expression included; other strides are products of sizes,
// printed as a sympy-like product ("8*s1"), which torch may print in another
// order (only hints are read downstream). Sizes of 0 are treated as 1 in
// stride products, as make_contiguous_strides_for does.
#pragma once

#include <span>
#include <vector>

#include "remat/graph.h"

namespace remat {

// One tensor's metadata, in a form rewrites can compute with. StrIds live in
// the string pool of the graph family it came from.
struct TensorValue {
  StrId dtype = 0;
  uint16_t itemsize = 0;
  StrId device = 0;
  std::vector<Dim> shape;
  std::vector<Dim> stride;
  // Symbols the value may mention: its source's free symbols. set_tensor_value
  // keeps those its dims do mention.
  std::vector<StrId> symbol_candidates;
};

// The (first) tensor of node `id`'s value, which must be a tensor.
TensorValue tensor_value(const Graph& g, NodeId id);

// The result of a pointwise op over `operands` (one or two), with `dtype`.
TensorValue pointwise(StringPool& strings, std::span<const TensorValue* const> operands,
                      StrId dtype, uint16_t itemsize);
TensorValue amax_keepdim_last(StringPool& strings, const TensorValue& x);

// Makes `n` a tensor node with value `v` (and tensor_meta): appends v to b's
// value pool under storage id `storage` (a fresh one, as a new tensor's).
// `strings` is the pool b interns into.
void set_tensor_value(GraphBuilder& b, const StringPool& strings, Node& n, const TensorValue& v,
                      int64_t storage);

// The next storage id no tensor of `graphs` uses.
int64_t fresh_storage(std::span<const Graph* const> graphs);

}  // namespace remat
