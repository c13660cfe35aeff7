// memory/bytes.cc — allocation_bytes (memory/bytes.h).
#include "memory/bytes.h"

#include <cstdlib>
#include <limits>

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

}  // namespace remat::memory
