// graph/dtypes.h — torch dtype names and their itemsize.
//
// Contract: dtype_itemsize returns the bytes per element torch reports
// (`torch.<name>.itemsize`) for every dtype torch 2.13 defines, under its
// canonical name ("float32") and its aliases ("float", "half", "long", ...);
// 0 for a name it does not know. Sub-byte dtypes report 1, as torch does.
// canonical_dtype maps a name or alias to the name torch prints
// (str(torch.half) is "torch.float16"); dtype_kind says what kind of number a
// dtype holds; float_range is torch.finfo(dtype)'s (min, max) for the real
// floating dtypes finfo supports.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace remat {

uint16_t dtype_itemsize(std::string_view name);

// "" for a name that is no torch dtype.
std::string_view canonical_dtype(std::string_view name);

enum class DtypeKind : uint8_t { kFloat, kInt, kBool, kComplex, kOther };
// For a canonical name; kOther for quantized, bits and unknown dtypes.
DtypeKind dtype_kind(std::string_view canonical);

struct FloatRange {
  double min = 0, max = 0;
};
// torch.finfo(dtype).min / .max of a canonical real floating dtype; nullopt
// when finfo does not support it.
std::optional<FloatRange> float_range(std::string_view canonical);

}  // namespace remat
