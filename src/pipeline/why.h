// pipeline/why.h — the reason behind each joint node's fate
// (NodeDecision::why, capacity, detail), for reports and --explain.
//
// Contract: fill_why reads the fates already in `decisions` (one per joint
// node) and sets why, capacity and detail from what the partition knew when
// it decided: the prepared graph (placeholders, checkpoint policies; its
// nodes' origins are joint ids), the partitioner, the cut's story by joint
// id (decide.h's cut_story; its capacity / tie / lifted vectors are empty
// when the cut was not traced, and then the min-cut reasons are coarser),
// and the trace (the budget step that decided; the last knapsack record's
// items). Deterministic; no allocation per node beyond `detail`.
#pragma once

#include <string_view>
#include <vector>

#include "decide/decide.h"
#include "remat/result.h"

namespace remat {

void fill_why(const Graph& prepared, std::string_view partitioner, const CutStory& story,
              const PartitionTrace& trace, std::vector<NodeDecision>& decisions);

}  // namespace remat
