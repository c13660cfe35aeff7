// io/file.h — what the JSON reader needs from io/file.cc beyond remat/io.h.
//
// Contract: is_regular_within_limit says whether `path` is a regular file
// that the reader may load in one piece (simdjson's padded load); it throws
// the same Error(kIo) as read_file when the file is larger than `max_bytes`,
// and returns false for anything else (a stream, a device, a missing path),
// which read_file then reads within the limit or reports.
#pragma once

#include <cstdint>
#include <string>

namespace remat {

bool is_regular_within_limit(const std::string& path, uint64_t max_bytes);

}  // namespace remat
