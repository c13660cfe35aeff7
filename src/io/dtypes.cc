// io/dtypes.cc — see dtypes.h. The table was listed from torch 2.13:
// every torch.dtype attribute of the torch module with its itemsize.
#include "io/dtypes.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace remat::io {

namespace {

using Entry = std::pair<std::string_view, uint16_t>;

// Sorted by name, for a binary search.
constexpr Entry kDtypes[] = {
    {"bfloat16", 2},
    {"bits16", 2},
    {"bits1x8", 1},
    {"bits2x4", 1},
    {"bits4x2", 1},
    {"bits8", 1},
    {"bool", 1},
    {"cdouble", 16},
    {"cfloat", 8},
    {"chalf", 4},
    {"complex128", 16},
    {"complex32", 4},
    {"complex64", 8},
    {"double", 8},
    {"float", 4},
    {"float16", 2},
    {"float32", 4},
    {"float4_e2m1fn_x2", 1},
    {"float64", 8},
    {"float8_e4m3fn", 1},
    {"float8_e4m3fnuz", 1},
    {"float8_e5m2", 1},
    {"float8_e5m2fnuz", 1},
    {"float8_e8m0fnu", 1},
    {"half", 2},
    {"int", 4},
    {"int1", 1},
    {"int16", 2},
    {"int2", 1},
    {"int3", 1},
    {"int32", 4},
    {"int4", 1},
    {"int5", 1},
    {"int6", 1},
    {"int64", 8},
    {"int7", 1},
    {"int8", 1},
    {"long", 8},
    {"qint32", 4},
    {"qint8", 1},
    {"quint2x4", 1},
    {"quint4x2", 1},
    {"quint8", 1},
    {"short", 2},
    {"uint1", 1},
    {"uint16", 2},
    {"uint2", 1},
    {"uint3", 1},
    {"uint32", 4},
    {"uint4", 1},
    {"uint5", 1},
    {"uint6", 1},
    {"uint64", 8},
    {"uint7", 1},
    {"uint8", 1},
};
static_assert(std::is_sorted(std::begin(kDtypes), std::end(kDtypes)));

}  // namespace

uint16_t dtype_itemsize(std::string_view name) {
  auto it = std::lower_bound(std::begin(kDtypes), std::end(kDtypes), name,
                             [](const Entry& e, std::string_view n) { return e.first < n; });
  return it != std::end(kDtypes) && it->first == name ? it->second : 0;
}

}  // namespace remat::io
