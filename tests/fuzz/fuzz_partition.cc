// tests/fuzz/fuzz_partition.cc — libFuzzer target: bytes -> read (and
// validate) -> partition (min-cut, min-cut under a memory budget, default)
// -> write -> read.
//
// Contract: for any input, remat either rejects it with remat::Error or
// partitions it; nothing else escapes (another exception, a crash, a
// sanitizer report or a hang is a finding). The input's length modulo 3
// picks the partitioner, so each execution runs one and a mutation that adds
// or drops a byte switches it. What it checks beyond not crashing:
//  * an accepted graph's canonical form is a fixed point: written, read back
//    and written again, it gives the same bytes (docs/format.md);
//  * the result document of every partition that succeeds is valid JSON, and
//    the forward and backward graphs it holds read back as joint graphs.
// Run: tools/test.sh (a short fixed time), or by hand:
//   build-asan/remat_fuzz -dict=tests/fuzz/joint_graph.dict CORPUS tests/fuzz/seeds
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "remat/error.h"
#include "remat/io.h"
#include "remat/partition.h"

namespace {

using namespace remat;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "remat_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// The forward or backward graph of a result as a joint graph document,
// written and read back: derived graphs must be as well-formed as inputs.
void round_trip(const Graph& g, const char* which) {
  JointGraph j;
  j.graph = g;
  const std::string text = write_joint_graph(j);
  try {
    const JointGraph back = read_joint_graph(text);
    if (back.graph.size() != g.size()) finding(which, "read back with another node count");
  } catch (const Error& e) {
    finding(which, std::string("does not read back: ") + e.what() + "\n" + text);
  }
}

void partition_and_check(const JointGraph& joint, int how) {
  PartitionOptions options;
  if (how == 1) options.activation_memory_budget = 0.5;
  PartitionResult r;
  try {
    r = how == 2 ? default_partition(joint, options)
                 : min_cut_rematerialization_partition(joint, options);
  } catch (const Error&) {
    return;  // a clear rejection (no finite cut, unsupported, ...) is fine
  }
  const std::string doc = write_result(joint, r);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(doc).get(root) != simdjson::SUCCESS) finding("result is not JSON", doc);
  round_trip(r.forward, "forward graph");
  round_trip(r.backward, "backward graph");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  JointGraph joint;
  try {
    joint = read_joint_graph(text);
  } catch (const Error&) {
    return 0;  // rejected with a message: what bad input should get
  }
  const std::string canonical = write_joint_graph(joint);
  try {
    const std::string again = write_joint_graph(read_joint_graph(canonical));
    if (again != canonical) finding("canonical form is not a fixed point", canonical + "\n" + again);
  } catch (const Error& e) {
    finding("canonical form does not read back", std::string(e.what()) + "\n" + canonical);
  }
  partition_and_check(joint, static_cast<int>(size % 3));
  return 0;
}
