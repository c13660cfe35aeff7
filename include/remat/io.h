// remat/io.h — JSON format v1 for joint graphs and partition results.
//
// Contract: docs/format.md is the specification and schema/ holds the JSON
// schemas. Readers reject malformed input with remat::Error naming the node
// and field; they never crash. Writers are deterministic (same input, same
// bytes). File writes are atomic: a temporary file renamed into place, so no
// half-written output is ever left behind.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "remat/partition.h"

namespace remat {

inline constexpr int kFormatVersion = 1;

JointGraph read_joint_graph(std::string_view json);
JointGraph read_joint_graph_file(const std::string& path);

std::string write_joint_graph(const JointGraph& joint);
std::string write_result(const JointGraph& joint, const PartitionResult& result);
// {"memory": {...}, "hazards": [...]} for a forward/backward pair, as in a
// result document.
std::string write_memory(const Graph& forward, const Graph& backward, const MemoryProfile& memory,
                         const std::vector<MutationHazard>& hazards);

// Writes `content` to `path` atomically; throws Error(kIo) on failure.
void write_file_atomic(const std::string& path, std::string_view content);
std::string read_file(const std::string& path);

}  // namespace remat
