// io/dtypes.h — torch dtype names and their itemsize.
//
// Contract: dtype_itemsize returns the bytes per element torch reports
// (`torch.<name>.itemsize`) for every dtype torch 2.13 defines, under its
// canonical name ("float32") and its aliases ("float", "half", "long", ...);
// 0 for a name it does not know. Sub-byte dtypes report 1, as torch does.
#pragma once

#include <cstdint>
#include <string_view>

namespace remat::io {

uint16_t dtype_itemsize(std::string_view name);

}  // namespace remat::io
