// remat/info.h — what a joint graph holds, before any partitioning: the one
// summary `remat info` prints and remat.info() returns.
//
// Contract: graph_info is a pure function of the joint graph and the default
// op registry with the graph's own category overrides (as the partitioners
// see it). It never throws for a graph read_joint_graph accepted: the
// forward/backward split, which torch's classify_nodes can refuse, comes
// with the reason instead (split_error).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "remat/ops.h"
#include "remat/result.h"

namespace remat {

struct GraphInfo {
  size_t nodes = 0;
  std::array<size_t, 4> by_kind{};  // indexed by NodeKind
  size_t ops = 0;                   // distinct ops of the graph
  size_t tensors = 0;               // tensor values over all nodes
  int num_fwd_outputs = 0;
  size_t static_lifetime_inputs = 0;
  size_t op_overrides = 0;          // the graph's own category overrides
  // call_function nodes per category, in kOpCategoryNames' order, and those
  // in no category.
  std::array<size_t, std::size(kOpCategoryNames)> by_category{};
  size_t uncategorized = 0;
  // classify_nodes' split; when it refused the graph, split_error says why
  // and the three counts are 0.
  size_t forward = 0, backward = 0, unclaimed = 0;
  std::string split_error;
  // Bytes over the call_function nodes that have a size (sized), saturating
  // at INT64_MAX; `unsized` counts the others.
  int64_t activation_bytes = 0;
  size_t sized = 0, unsized = 0;
};

GraphInfo graph_info(const JointGraph& joint);

}  // namespace remat
