// io/write_trace.h — the result JSON's "trace" object (PartitionTrace).
//
// Contract: write_trace emits one JSON object describing `trace` with node
// ids written as the joint graph's names; deterministic (same trace, same
// bytes). docs/format.md ("trace") is the specification. Internal to io/:
// write_result calls it when the trace is not empty.
#pragma once

#include "io/json_writer.h"
#include "remat/result.h"

namespace remat::io {

void write_trace(JsonWriter& w, const Graph& joint, const PartitionTrace& trace);

}  // namespace remat::io
