// io/memory_json.h — the "memory" and "hazards" members of a result document
// (internal to src/io).
//
// Contract: docs/format.md ("memory", "hazards"). Nodes are named by their
// name in the graph they belong to (which for a partition result is the
// joint node's name, or a name the partitioner created). Deterministic.
#pragma once

#include <vector>

#include "io/json_writer.h"
#include "remat/memory.h"

namespace remat::io {

// The memory object, as the value of a key the caller wrote.
void write_memory_json(JsonWriter& w, const Graph& forward, const Graph& backward,
                       const MemoryProfile& m, int indent);
// The hazards array, as the value of a key the caller wrote.
void write_hazards_json(JsonWriter& w, const Graph& forward, const Graph& backward,
                        const std::vector<MutationHazard>& hazards, int indent);

}  // namespace remat::io
