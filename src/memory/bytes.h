// memory/bytes.h — the bytes a tensor's storage takes, and how the peak
// searches write a size (src/memory and the stages built on it).
//
// Contract: allocation_bytes is the `extent` rule of remat/memory.h:
// 1 + sum((size-1) * |stride|) elements (numel when no stride is known or a
// dim has no hint, 0 for an empty tensor) times the item size, saturating at
// INT64_MAX. size_text writes bytes as the peak searches' messages and
// labels do: "512 B", "20.31 KiB" (two decimals tell nearby limits apart).
#pragma once

#include <cstdint>
#include <string>

#include "remat/graph.h"

namespace remat::memory {

int64_t allocation_bytes(const Graph& g, const TensorMeta& t);
std::string size_text(int64_t bytes);

}  // namespace remat::memory
