// remat/io.h — JSON format v1 for joint graphs and partition results.
//
// Contract: docs/format.md is the specification and schema/ holds the JSON
// schemas. Readers reject malformed input with remat::Error naming the node
// and field; they never crash. Writers are deterministic (same input, same
// bytes; the result's timings are left out unless asked for). Inputs have a
// size limit, so an endless stream is an error rather than an exhausted
// memory. File writes are atomic: a temporary file renamed into place, so no
// half-written output is ever left behind (see write_file_atomic).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/partition.h"

namespace remat {

inline constexpr int kFormatVersion = 1;

// The default input size limit: 1 GiB, about four times a 10^6-node joint
// graph. simdjson reads documents up to 4 GiB - 1 (kMaxInputBytes).
inline constexpr uint64_t kDefaultMaxInputBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxInputBytes = 0xFFFFFFFF;

JointGraph read_joint_graph(std::string_view json);
// Reads a file (or a stream such as /dev/stdin) of at most `max_bytes`;
// a larger one is an Error(kIo) naming the path and the limit.
JointGraph read_joint_graph_file(const std::string& path,
                                 uint64_t max_bytes = kDefaultMaxInputBytes);

std::string write_joint_graph(const JointGraph& joint);
// `timings`: include the result's "seconds" and "stages", the only fields
// that differ between two runs on the same input.
std::string write_result(const JointGraph& joint, const PartitionResult& result,
                         bool timings = false);

// {"memory": {...}, "hazards": [...]} for a forward/backward pair, as in a
// result document.
std::string write_memory(const Graph& forward, const Graph& backward, const MemoryProfile& memory,
                         const std::vector<MutationHazard>& hazards);

// Writes `content` to `path`, which names a file or a symbolic link to one:
// a regular file (or a new one) is replaced atomically by a temporary file
// renamed over it, keeping the old file's permission bits (other hard links
// to it keep the old content); a FIFO or character device is written into;
// anything else is refused. Throws Error(kIo) naming `path` on failure and
// leaves no temporary file behind.
void write_file_atomic(const std::string& path, std::string_view content);
// The bytes of a file or stream of at most `max_bytes`; Error(kIo) otherwise.
std::string read_file(const std::string& path, uint64_t max_bytes = kDefaultMaxInputBytes);

// For programs, not called by the library itself: on SIGINT, SIGTERM and
// SIGHUP, remove the temporary files of writes in progress, then die of the
// signal as before. Only signals still at their default action are hooked.
void remove_partial_writes_on_signals();

}  // namespace remat
