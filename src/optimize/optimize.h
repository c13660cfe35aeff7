// optimize/optimize.h — stage 3 under a peak limit, beyond torch's plans:
// the valid plan with the least estimated recompute whose simulated peak
// fits (PartitionOptions::PeakSearch kFast and kExact).
//
// Contract (of minimize_recompute; each search's own is in its file):
//  * Plans are saved sets over a PlanSpace (optimize/space.h). `build`
//    builds one (prepared ids, graph order) exactly as the pipeline builds
//    any decision and measures it (memory/plan.h); a plan is returned only
//    after its build simulated within `limit` with no mutation hazard
//    (optimize/search.h: the builds, hazards, best plan and stopping every
//    search shares).
//  * kFast: fast (optimize/fast.h: priced min-cuts, their corrections, and
//    on large spaces torch's plans, optimize/torch_plans.h, and checkpointed
//    plans, optimize/checkpoint.h), never worse than torch's own plans. On
//    spaces of at most kPolishVars vars fast's polish follows
//    (optimize/exact.h): when nothing fits yet the smallest-peak search
//    until a plan fits, then exact's MILP from the plan, both bounded by
//    rounds, not seconds.
//  * kExact: fast first (an incumbent, and a first cut of hazards); when it
//    found none, the smallest-peak search until a plan fits; then exact
//    (optimize/exact.h) from the plan. On time out the best verified plan
//    is returned with the bound.
//  * Unreachable: Error(kBudgetUnreachable) naming the smallest simulated
//    peak among the plans built and a proven lower bound of any valid
//    plan's peak (exact: the smallest-peak search's, within the time limit,
//    stopping early after kStallRounds builds that found no smaller peak;
//    fast: Search::fast_peak_bound, or on spaces of at most kPolishVars vars
//    the larger of it and the smallest-peak search it ran).
//  * The result's peak_search names the search and counts the plans built
//    and the solver rounds; its recompute_lower_bound and optimal are what
//    exact proved (fast without a polish proves nothing).
//  * Deterministic for a given graph, options and limit (a time limit that
//    stops the solver can change the answer).
//  * REMAT_MILP_DUMP_DIR set (benchmarks only): each program solved is
//    written to DIR/<n>.mps first (optimize/search.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optimize/space.h"
#include "remat/options.h"
#include "remat/result.h"

namespace remat::optimize {

// Spaces of more vars are large: fast gets kLargeSpaceEffort there and
// searches torch's and checkpointed plans first, and no polish follows.
inline constexpr int kPolishVars = 2000;

// Builds and measures the plan saving exactly `saved` (prepared ids).
using Builder = std::function<PartitionResult(const std::vector<NodeId>& saved)>;

struct Outcome {
  PartitionResult result;     // built, fits, no hazards; peak_search filled
  std::vector<NodeId> saved;  // prepared ids, graph order
};

// `ctx` is the context `space` was made from.
Outcome minimize_recompute(const DecideContext& ctx, PlanSpace& space, int64_t limit,
                           PartitionOptions::PeakSearch mode, double seconds, const Builder& build);

}  // namespace remat::optimize
