// memory/bytes.h — the bytes a tensor's storage takes (internal to
// src/memory).
//
// Contract: allocation_bytes is the `extent` rule of remat/memory.h:
// 1 + sum((size-1) * |stride|) elements (numel when no stride is known or a
// dim has no hint, 0 for an empty tensor) times the item size, saturating at
// INT64_MAX.
#pragma once

#include <cstdint>

#include "remat/graph.h"

namespace remat::memory {

int64_t allocation_bytes(const Graph& g, const TensorMeta& t);

}  // namespace remat::memory
