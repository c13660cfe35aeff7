// graph/dtypes.cc — see dtypes.h. The table was listed from torch 2.13:
// every torch.dtype attribute of the torch module with its itemsize.
#include "graph/dtypes.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace remat {

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

namespace {

// torch's dtype aliases: the attribute names of the torch module whose str()
// names another dtype. Sorted by alias.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"cdouble", "complex128"}, {"cfloat", "complex64"}, {"chalf", "complex32"},
    {"double", "float64"},     {"float", "float32"},    {"half", "float16"},
    {"int", "int32"},          {"long", "int64"},       {"short", "int16"},
};
static_assert(std::is_sorted(std::begin(kAliases), std::end(kAliases)));

struct NamedRange {
  std::string_view name;
  FloatRange range;
};
// torch.finfo(dtype).min / .max, as torch 2.13 prints them (float4_e2m1fn_x2
// has no finfo: torch raises).
constexpr NamedRange kFloatRanges[] = {
    {"bfloat16", {-3.3895313892515355e+38, 3.3895313892515355e+38}},
    {"float16", {-65504.0, 65504.0}},
    {"float32", {-3.4028234663852886e+38, 3.4028234663852886e+38}},
    {"float64", {-1.7976931348623157e+308, 1.7976931348623157e+308}},
    {"float8_e4m3fn", {-448.0, 448.0}},
    {"float8_e4m3fnuz", {-240.0, 240.0}},
    {"float8_e5m2", {-57344.0, 57344.0}},
    {"float8_e5m2fnuz", {-57344.0, 57344.0}},
    {"float8_e8m0fnu", {5.877471754111438e-39, 1.7014118346046923e+38}},
};

}  // namespace

std::string_view canonical_dtype(std::string_view name) {
  for (const auto& [alias, canonical] : kAliases) {
    if (alias == name) return canonical;
  }
  return dtype_itemsize(name) != 0 ? name : std::string_view{};
}

DtypeKind dtype_kind(std::string_view n) {
  if (n == "bool") return DtypeKind::kBool;
  if (n.starts_with("complex")) return DtypeKind::kComplex;
  if (n.starts_with("float") || n == "bfloat16") return DtypeKind::kFloat;
  if ((n.starts_with("int") || n.starts_with("uint")) && dtype_itemsize(n) != 0)
    return DtypeKind::kInt;
  return DtypeKind::kOther;
}

std::optional<FloatRange> float_range(std::string_view canonical) {
  for (const NamedRange& r : kFloatRanges) {
    if (r.name == canonical) return r.range;
  }
  return std::nullopt;
}

uint16_t dtype_itemsize(std::string_view name) {
  auto it = std::lower_bound(std::begin(kDtypes), std::end(kDtypes), name,
                             [](const Entry& e, std::string_view n) { return e.first < n; });
  return it != std::end(kDtypes) && it->first == name ? it->second : 0;
}

}  // namespace remat
