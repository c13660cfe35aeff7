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
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "remat/options.h"
#include "remat/result.h"

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

// --- options ---------------------------------------------------------------
// The options object (docs/format.md "Options",
// schema/partition_options.v1.schema.json): {"activation_memory_budget": 0.5,
// "recompute_views": true, ...}, one key per PartitionOptions field that has
// a JSON form, plus "torch_release" ("2.14": TorchBehavior::of, applied
// before every other key) and "torch_switches" ({"switch": bool}: single
// TorchBehavior switches over the release's).

// The engine's callbacks, which have no JSON form: a front door (the Python
// binding) converts its callables and passes them here.
struct OptionHooks {
  CustomKnapsackFn knapsack_solver;            // selects activation_memory_budget_solver "custom"
  CustomRuntimeEstimatorFn runtime_estimator;  // selects ..._runtime_estimator "custom"
  OffloadNodeRuntimeFn offload_node_runtime;
  SymbolicSizeFn size_check;                   // activation_quantization.symbolic_size
  std::shared_ptr<RankGroup> rank_group;
};

// Sets the fields the JSON object names and leaves the others as they are,
// so a front door can layer several sources (a file, then single flags).
// An unknown key, a wrong type or an unknown enum value throws
// Error(kInvalidOption) "option 'KEY': ..."; malformed JSON Error(kParse).
// Does not validate: ranges and names are validate()'s.
void apply_options(std::string_view json, PartitionOptions& options);

// The options a front door starts from for `joint`: torch's defaults, for
// the release the graph records (JointGraph::torch_version) or, when it
// records none, for the newest supported release. A recorded release remat
// does not reproduce (older, newer, a pre-release) is Error(kUnsupported)
// naming it and the supported range: the caller must choose a release.
PartitionOptions default_options(const JointGraph& joint);
// Whether an options object names "torch_release" (an explicit choice,
// which wins over the graph's); false for malformed JSON.
bool names_torch_release(std::string_view json);

// The keys of an options object's "ops" that match no operator of `joint`
// (no op's registry key: its packet, or the function or higher-order name),
// in the object's order: settings that do nothing for this graph, such as
// an overload name ("aten.transpose.int") where categories are keyed by
// packet ("aten.transpose"). Empty for malformed JSON (apply_options'
// to report) and for an object without "ops".
std::vector<std::string> unmatched_op_keys(const JointGraph& joint, std::string_view json);

// Torch's defaults (for `joint`'s recorded release, default_options, unless
// `json` names a torch_release), then `json` (empty: none), then the hooks
// given (a solver or estimator hook selects "custom", as torch's config
// holding a CustomKnapsackSolver does), then PartitionOptions::validate().
PartitionOptions read_options(std::string_view json, const OptionHooks& hooks = {},
                              const JointGraph* joint = nullptr);

// A torch._functorch.config flag remat honors and the options key it sets
// (the same name, except torch's private _sync_decision_cross_ranks).
struct TorchConfigFlag {
  std::string_view torch_name;
  std::string_view option;
};
// All of them, in options.h's order: what `remat partition --config` accepts.
std::span<const TorchConfigFlag> torch_config_flags();

// For programs, not called by the library itself: on SIGINT, SIGTERM and
// SIGHUP, remove the temporary files of writes in progress, then die of the
// signal as before. Only signals still at their default action are hooked.
void remove_partial_writes_on_signals();

}  // namespace remat
