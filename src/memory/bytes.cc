// memory/bytes.cc — allocation_bytes, size_text (memory/bytes.h).
#include "memory/bytes.h"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace remat::memory {

int64_t allocation_bytes(const Graph& g, const TensorMeta& t) {
  const auto shape = g.shape(t);
  bool hinted = true;
  for (const Dim& d : shape) {
    if (d.has_hint && d.value == 0) return 0;
    hinted = hinted && d.has_hint;
  }
  const __int128 itemsize = t.itemsize;
  __int128 elements = t.numel_hint;
  if (hinted && t.has_stride) {
    const auto stride = g.stride(t);
    elements = 1;
    for (size_t i = 0; i < shape.size(); ++i)
      elements += static_cast<__int128>(shape[i].value - 1) * std::llabs(stride[i].value);
  }
  const __int128 bytes = elements * itemsize;
  return bytes > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bytes);
}

std::string size_text(int64_t b) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.2f} {}", v, kUnits[u]);
}

}  // namespace remat::memory
