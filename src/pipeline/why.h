// pipeline/why.h — the reason behind each joint node's fate
// (NodeDecision::why, capacity, detail): the one source of "why" that the
// result JSON, the report and --explain all word.
//
// Contract: fill_why reads the fates already in `decisions` (one per joint
// node) and sets why, capacity and detail from what the partition knew when
// it decided: the prepared graph (placeholders, checkpoint policies; its
// nodes' origins are joint ids), the partitioner, and the cut's story by
// joint id (decide.h's cut_story: capacities, ties, the bans the knapsack
// or a budget tier lifted, the knapsack's kept items, the budget step).
// The pipeline records that story for every plain decision, traced or not,
// so the reasons never depend on PartitionOptions::trace; a cut without
// one (remat's peak-budget search) gets the coarser min-cut reasons.
// Deterministic; no allocation per node beyond `detail`.
#pragma once

#include <string_view>
#include <vector>

#include "decide/decide.h"
#include "remat/result.h"

namespace remat {

void fill_why(const Graph& prepared, std::string_view partitioner, const CutStory& story,
              std::vector<NodeDecision>& decisions);

}  // namespace remat
