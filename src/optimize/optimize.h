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
//    until a plan fits, then exact's MILP from the plan, each bounded by
//    kPolishRounds solver rounds and kPolishNodes solver nodes, and each
//    skipped when its first program has more than kPolishSize rows plus
//    columns (exact's rounds, with or without a plan in hand, stopped at
//    any such program).
//  * kExact: fast first (an incumbent, and a first cut of hazards); when it
//    found none, the smallest-peak search until a plan fits; then exact
//    (optimize/exact.h) from the plan, all its solves within Effort::nodes.
//    When they run out before a proof, the best verified plan is returned
//    with the bound and PeakSearchSummary::stopped_by "nodes".
//  * Unreachable: Error(kBudgetUnreachable) naming the smallest simulated
//    peak among the plans built and a proven lower bound of any valid
//    plan's peak (exact: the smallest-peak search's, within the node budget,
//    stopping early after kStallRounds builds that found no smaller peak;
//    fast: Search::fast_peak_bound, or on spaces of at most kPolishVars vars
//    the larger of it and the smallest-peak search it ran).
//  * The result's peak_search names the search and counts the plans built,
//    the solver rounds and their nodes; its recompute_lower_bound and
//    optimal are what exact proved (fast without a polish proves nothing);
//    stopped_by what cut exact short (fast's own caps are its design, not a
//    cut).
//  * Deterministic for a given graph, options and limit, on every machine at
//    any load: every search stops on counted work (rounds, builds, solver
//    nodes). Only Effort::seconds, a safety net off by default, reads the
//    clock; when it stops a search, stopped_by says "time".
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

// Spaces of at most kPolishVars vars get fast's MILP polish: past that one
// root LP of exact's program costs seconds (a 2.7k-node transformer stack,
// 1.4k vars: 5 s of CPU for the root alone), hundreds of plain partitions.
inline constexpr int kPolishVars = 400;
// The solver nodes each part of that polish may spend, so that fast stays
// a small multiple of a plain partition on the spaces it runs on.
inline constexpr int64_t kPolishNodes = 2000;
// Nor a polish whose first program has more rows plus columns than this
// (the space's vars alone undercount it: the memory rows are most of it).
// A node's cost grows with the program: the corpus's polishes start at
// 1144 or less; a GRU unrolled 6 steps (432 nodes, 221 vars) starts at
// 1644 to 2024, where its 2000 nodes took 8 to 116 s (its lazy rows grew
// the programs to 6.7k) and found no plan cheaper than fast's own. Lazy
// rows grow a program from round to round, so exact's rounds in the
// polish measure every round: transformer_blocks_x2 under the inductor
// model (one of its limits in tests/python/test_inductor_memory.py)
// started at 1104 and went on at 2459, where 2000 nodes took 80-160 s (a
// plain partition: 0.01 s) for the plan its first round had found; the
// same GRU as the drop-in hands it over (366 nodes), with no plan in hand
// at a limit no plan reaches, started at 1.3k and went on at 3.5k, where
// each round took 10-13 s (50-60 s a limit) to say what the first said.
// The smallest-peak search measures its first program only: its later
// rounds find the smallest peak an unreachable error names (capping them
// named 24432 bytes for transformer_block_inductor, where 23904 is
// reachable).
inline constexpr int64_t kPolishSize = 1500;
// Spaces of more vars are large: fast gets kLargeSpaceEffort there and
// searches torch's and checkpointed plans first.
inline constexpr int kLargeSpaceVars = 2000;

// Builds and measures the plan saving exactly `saved` (prepared ids).
using Builder = std::function<PartitionResult(const std::vector<NodeId>& saved)>;

struct Outcome {
  PartitionResult result;     // built, fits, no hazards; peak_search filled
  std::vector<NodeId> saved;  // prepared ids, graph order
};

// How much exact may search: `nodes`, branch-and-bound nodes over all its
// solves, each solve counting at least one (counted work: the answer is the
// same on every machine; 0: sized to its first program, search.h
// auto_node_budget); `seconds`, a wall-time safety net (0: none).
// PartitionOptions::peak_search_nodes / peak_search_seconds.
struct Effort {
  int64_t nodes = 0;
  double seconds = 0;
};

// Throws the unreachable error of the contract above: no plan fits `limit`;
// the smallest simulated peak built (-1: none without a hazard) and a
// proven lower bound of any valid plan's peak (<= 0: none proven).
[[noreturn]] void throw_unreachable(int64_t limit, int64_t smallest_peak, int64_t bound);

// `ctx` is the context `space` was made from.
Outcome minimize_recompute(const DecideContext& ctx, PlanSpace& space, int64_t limit,
                           PartitionOptions::PeakSearch mode, const Effort& effort, const Builder& build);

}  // namespace remat::optimize
