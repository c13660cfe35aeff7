// remat/sync.h — ranks agreeing on one partition decision
// (torch._functorch.config._sync_decision_cross_ranks).
//
// Contract: sync_decision_cross_ranks does what the reproduced torch
// release's `_sync_decision_cross_ranks` does between deciding and
// extracting, through the caller's RankGroup instead of torch.distributed:
//  1. Nothing, with no collective issued, when the group has one rank or the
//     prepared graph has no functional collective (an OpOverload in
//     namespace _c10d_functional or c10d_functional).
//  2. How the ranks name the graph and its nodes to each other, which
//     depends on the release (the switches of remat/torch_release.h):
//       2.13 on (sync_canonical_names): the canonical node names
//         (canonical_node_names) and the SHA-256 of the canonical structure
//         string (canonical_graph_digest); the targets in both are spelled
//         by str() up to 2.13 and by FX's qualified name from 2.14 on
//         (sync_stable_target_str, TargetSpelling);
//       2.11 and 2.12: the nodes' own names, and the SHA-256 of those names
//         joined in graph order (node_name_digest).
//     all_gather of that hex digest. Nothing more when the ranks' digests
//     differ (2.14 on, torch logs which rank differed first: SyncOutcome::log).
//  3. all_gather of this rank's saved values by those names; each list
//     priced with torch's `_size_of` on this rank's graph; all_reduce_max of
//     those totals; the rank with the smallest (the first on a tie) wins and
//     every rank adopts its list, in its order.
// The collectives are the same, in the same order, with the same payloads as
// torch's, so a rank running remat and one running torch's own partitioner
// agree with each other as well. Which process group carries them (2.15
// moved them to dynamo's compile-sync group) is the caller's RankGroup's
// business: the engine's part is the same on any group.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remat/graph.h"
#include "remat/partition.h"

namespace remat {

// What the agreement needs from the caller's process group: the calls torch
// makes on its process group (the default group up to 2.14, dynamo's
// compile-sync group from 2.15 on). Every rank must call the same
// methods in the same order (they are collectives); an exception a method
// throws propagates out of sync_decision_cross_ranks unchanged.
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // all_gather_object of one string per rank; returns world_size() strings,
  // in rank order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // all_gather_object of one list of strings per rank.
  virtual std::vector<std::vector<std::string>> all_gather(
      const std::vector<std::string>& mine) = 0;
  // all_reduce with MAX over a vector of the same length on every rank.
  virtual std::vector<int64_t> all_reduce_max(const std::vector<int64_t>& mine) = 0;

  // How this process prints a call_function target that is a Python callable
  // (`qualified`: the IR's "operator.getitem", "torch.sym_sum"), as Python's
  // str() does: torch hashes `str(node.target)`. The default spells builtins
  // of the operator, math and builtins modules "<built-in function NAME>" and
  // anything else "<function QUALNAME>"; Python's own str() of a Python
  // function also holds its address, which only the host process knows
  // (remat.torch passes it on).
  virtual std::string target_repr(std::string_view qualified) const;
  // The same target as torch 2.14 on prints it (`_stable_target_str`): FX's
  // `_get_qualified_name`, which is the same in every process. The default
  // spells operator functions "_operator.NAME", builtins bare ("getattr")
  // and anything else as `qualified`.
  virtual std::string target_qualified_name(std::string_view qualified) const;

  // Told once the ranks agreed: the winning rank and torch's trace payload
  // ("picked_rank_idx=..., saved_nodes of current rank={...}"), which torch
  // logs as the structured-trace artifact
  // "aot_joint_graph_sync_decision_cross_ranks". Not called when nothing was
  // synced. The default does nothing.
  virtual void agreed(int picked_rank, const std::string& trace_payload);
};

struct SyncOutcome {
  enum class Status : uint8_t {
    kSingleRank,     // world_size() <= 1: nothing to agree on
    kNoCollectives,  // the graph has no functional collective: torch skips it
    kGraphsDiffer,   // the ranks' canonical graphs differ: each keeps its own
    kAgreed,         // every rank now holds the picked rank's decision
  };
  Status status = Status::kSingleRank;
  // The decision to emit (ids of the plan's input joint graph): the picked
  // rank's list when kAgreed, the plan's own saved() otherwise.
  std::vector<NodeId> saved;
  int picked_rank = -1;       // kAgreed only
  std::string trace_payload;  // kAgreed only (see RankGroup::agreed)
  // What torch logs during the agreement (logger
  // "torch._functorch.partitioners"), for PartitionResult::trace.
  std::vector<LogRecord> log;
};

// How a rank prints a node's target when it hashes and orders the graph:
// Python's str(node.target) (torch up to 2.13: "aten.mm.default",
// "<built-in function getitem>", a Python function's address) or torch
// 2.14's `_stable_target_str` ("torch.ops.aten.mm.default",
// "_operator.getitem", "torch.sym_not").
enum class TargetSpelling : uint8_t { kStr, kQualified };

// Runs the agreement on `plan`'s decision; emit_partition(plan, out.saved)
// then finishes the partition. Throws Error naming the node when a value of
// a rank's list cannot be priced, as torch's `_size_of` raises, and
// Error(kInvalidGraph) when a rank sends a name this graph does not have.
SyncOutcome sync_decision_cross_ranks(const PartitionPlan& plan, RankGroup& group);

// torch's `_canonical_node_names` of `g`: "node_<i>" for every node, by
// NodeId, where i is the node's position in a topological order that does
// not depend on node names or on the graph's own order (Kahn's algorithm
// whose ready nodes are ordered by kind, target, canonical inputs and, for
// placeholders, dtype and a SHA-256 hash of the node's cone of users).
// `group` prints Python-callable targets (null: RankGroup's default), as
// `spelling` says (the default is the newest release's).
// Placeholders are keyed as tensors that do not require grad, which is what
// AOTAutograd's joint graphs hold (the IR keeps no requires_grad).
std::vector<std::string> canonical_node_names(const Graph& g, const RankGroup* group = nullptr,
                                              TargetSpelling spelling = TargetSpelling::kQualified);

// The lowercase SHA-256 hex digest torch 2.13 on all-gathers for `g`: of the
// nodes sorted by canonical name, "name:op" for placeholders and
// "name:op:target" otherwise, joined by "/".
std::string canonical_graph_digest(const Graph& g, const std::vector<std::string>& names,
                                   const RankGroup* group = nullptr,
                                   TargetSpelling spelling = TargetSpelling::kQualified);

// The digest torch 2.11 and 2.12 all-gather for `g`: the lowercase SHA-256
// hex digest of its node names, in graph order, joined by "/".
std::string node_name_digest(const Graph& g);

// Whether `g` calls a functional collective (torch's has_collectives).
bool has_functional_collectives(const Graph& g);

const char* sync_status_name(SyncOutcome::Status s);  // "agreed", "graphs_differ", ...

}  // namespace remat
