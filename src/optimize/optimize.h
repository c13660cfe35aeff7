// optimize/optimize.h — stage 3 under a peak limit, beyond torch's plans:
// the valid plan with the least estimated recompute whose simulated peak
// fits (PartitionOptions::PeakSearch kFast and kExact).
//
// Contract:
//  * Plans are saved sets over a PlanSpace (optimize/space.h). `build`
//    builds one (prepared ids, graph order) exactly as the pipeline builds
//    any decision and measures it (memory/plan.h); a plan is returned only
//    after its build simulated within `limit` with no mutation hazard. A
//    build with a hazard forbids saving the hazardous values from then on
//    (in every plan they would be saved the same way, so the hazard is the
//    value's, not the plan's).
//  * fast: min-cuts over the space (X_in -> X_out costs what saving X is priced
//    at, source -> X_in costs X's recompute estimate, dependencies and "needed"
//    are infinite), each the plan minimizing recompute plus priced saves. Two
//    pricings: one price per byte, bisected; then one price per memory row (the
//    rows' Lagrange multipliers, kPriceSteps projected subgradient steps), a
//    saved value paying the rows it lives in. The cheapest plan whose model
//    fits the target is kept, then a local search: each of the kGreedySaves
//    costliest recomputed values is saved instead when the model still fits, or
//    when recomputing one saved value instead (among the kSwapCandidates
//    largest) makes it fit for less. The plan is built; when it does not fit,
//    the kFastRepairMoves largest storages alive at its simulated peak change
//    sides (recomputed -> saved, saved -> recomputed) for the rest of the
//    search, and it runs again (at most FastEffort::rounds builds; a plan whose
//    model cost is not below the best built plan's measured recompute is not
//    built). Then the torch_plans search (memory/peak_budget.h: torch's own
//    plans over kPeakSearchBudgets, then its repairs) runs, and its plan
//    replaces fast's when it recomputes less or fast found none: fast is never
//    worse than torch's plans. Spaces of more than kLargeSpaceVars vars get
//    kLargeSpaceEffort instead of kSmallSpaceEffort (one round, fewer steps and
//    swaps: FastEffort), and the torch_plans search runs first there, without
//    its repair path and without building the candidates the chained model
//    (space.h chained_peak) puts over the limit: each of its builds that does
//    not fit corrects the targets as fast's own builds do, and the round tries
//    to beat its plan. When none of torch's plans fits there, checkpointed
//    plans (Chen et al. 2016): separators are vars where every recomputation
//    chain passes (no recomputable var before one is read by a forward-required
//    var after it); the plan checkpointing a prefix of c separators saves every
//    ~sqrt(c)-th of them, recomputes the rest of the prefix in the backward,
//    and saves what the backward reads after it. The fully checkpointed plan
//    (the family's smallest peak) is built first unless the chained model
//    (space.h chained_peak, a lower bound, exact where everything is
//    recomputed) says it may fit; then the shortest prefix that fits (the
//    family's least recompute) is searched by regula falsi on c, at most
//    kCheckpointBuilds more builds (the fully checkpointed plan built last when
//    none of them fits); such a plan is final (the round's cuts do not see the
//    chains that set its peak). Only when these fit nothing either does
//    torch_plans' repair path run. On spaces of at most kPolishVars vars, when
//    no plan fits yet, exact's smallest-peak search runs until one does (at
//    most kPolishRounds solver rounds, stopping after kStallRounds builds that
//    found no smaller peak); then exact's loop runs from the plan for at most
//    kPolishRounds solver rounds, stopping after kPolishStallRounds builds that
//    found no cheaper plan (a polish: it only ever replaces the plan by a
//    verified cheaper one, and reports optimal when it proves it). Each of
//    the two spends at most kPolishNodes solver nodes: rounds and nodes, not
//    seconds, so the answer does not depend on the machine.
//  * exact: starts from fast's plan (when it fits) as the incumbent; when
//    fast found none, from the first plan the smallest-peak search below
//    builds that fits (it stops there), else none. Then a
//    MILP (optimize/milp.h): binaries s (saved) and r (recomputed) per var,
//    minimize sum(cost * r) (plus kTieBreak of the cheapest cost at
//    most: fewer saved bytes), subject to the space's validity rules and its memory rows <=
//    limit. The MILP's rows relax two terms of the model (a saved value, or
//    the storage a saved or recomputed view of it holds, kept alive in the
//    backward by a recomputed user made later; a value kept alive in the
//    forward by a saved user the forward computes only to save it): a
//    solution whose model exceeds the limit is not built; its kLazyRows
//    most exceeding rows (forward or backward) are added with those terms,
//    linearized exactly for integral plans (lazy rows), and the MILP
//    solved again. Each other solution is built; one
//    that does not fit is cut off (a no-good cut on its saved set) and the
//    MILP solved again. The first
//    solution that fits is optimal when the solver proved optimality and the
//    model bounded every built plan's peak from below (it is checked each
//    time). When Effort::nodes run out (each solve counts at least one
//    node), the best verified plan is returned with the bound and
//    PeakSearchSummary::stopped_by "nodes".
//    The smallest-peak search below adds lazy rows the same way, against
//    its solution's peak.
//  * Unreachable: Error(kBudgetUnreachable) naming the smallest simulated
//    peak among the plans built and a proven lower bound of any valid
//    plan's peak (exact: the MILP minimizing the model's peak, verified the
//    same way, within the same node budget, stopping early after kStallRounds
//    builds that found no smaller peak; fast: every row with only what
//    every plan holds there). On spaces of at most kPolishVars vars fast
//    reports the smallest-peak search it ran (above).
//  * Deterministic for a given graph, options and limit, on every machine at
//    any load: every search stops on counted work (rounds, builds, solver
//    nodes). Only Effort::seconds, a safety net off by default, reads the
//    clock; when it stops a search, stopped_by says "time".
//  * REMAT_MILP_DUMP_DIR set (benchmarks only): exact writes each program to
//    DIR/<n>.mps (Milp::write_mps; n counts the process's solves) before solving it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optimize/space.h"
#include "remat/options.h"
#include "remat/result.h"

namespace remat::optimize {

inline constexpr int kFastRounds = 6;
inline constexpr int kStallRounds = 25;
// Spaces of at most kPolishVars vars get fast's MILP polish: past that one
// root LP of exact's program costs seconds (a 2.7k-node transformer stack,
// 1.4k vars: 5 s of CPU for the root alone), hundreds of plain partitions.
inline constexpr int kPolishVars = 400;
// Spaces of more than kLargeSpaceVars vars get fast's large-space path
// (kLargeSpaceEffort, torch's plans first, checkpointed plans).
inline constexpr int kLargeSpaceVars = 2000;
inline constexpr int kPolishRounds = 60;
inline constexpr int kPolishStallRounds = 25;
// fast's polish (and its smallest-peak search) on small spaces: the solver
// nodes each may spend, so fast stays a small multiple of a plain partition.
inline constexpr int64_t kPolishNodes = 2000;
// The objective's tie-break toward fewer saved bytes, in total, as a
// fraction of the cheapest recomputation: it never outweighs recompute.
inline constexpr double kTieBreak = 1e-4;
inline constexpr int kFastRepairMoves = 3;
// Per MILP solution the model rejects, the most exceeding rows added back
// with the terms the MILP's rows relax (exact's lazy rows).
inline constexpr int kLazyRows = 4;
inline constexpr int kPriceSteps = 60;
inline constexpr int kGreedySaves = 64;
inline constexpr int kSwapCandidates = 64;
inline constexpr int kBisectSteps = 20;
// fast's checkpointed plans on large spaces: the fewest separators worth
// it, and the builds of the search for the shortest fitting prefix.
inline constexpr size_t kMinSeparators = 4;
inline constexpr int kCheckpointBuilds = 4;

// How much fast searches: its rounds (builds), the per-byte price's
// bisection steps, the row prices' subgradient steps, the local search's
// saves and swap candidates. Spaces of more than kLargeSpaceVars vars (no
// polish follows there) get kLargeSpaceEffort, cut so that a 10^4-node
// graph stays within 5x a plain partition's time (bench/bench_memory.py's
// synthetic rows: each cut and each build there costs a sizeable fraction of
// a plain partition).
struct FastEffort {
  int rounds;
  int bisect_steps;
  int price_steps;
  int greedy_saves;
  int swap_candidates;
};
inline constexpr FastEffort kSmallSpaceEffort{kFastRounds, kBisectSteps, kPriceSteps, kGreedySaves,
                                              kSwapCandidates};
inline constexpr FastEffort kLargeSpaceEffort{1, 5, 4, 8, 8};

// Builds and measures the plan saving exactly `saved` (prepared ids).
using Builder = std::function<PartitionResult(const std::vector<NodeId>& saved)>;

struct Outcome {
  PartitionResult result;     // built, fits, no hazards; peak_search filled
  std::vector<NodeId> saved;  // prepared ids, graph order
};

// How much exact may search: `nodes`, branch-and-bound nodes over all its
// solves, each solve counting at least one (counted work: the answer is the
// same on every machine); `seconds`, a wall-time safety net (0: none).
// PartitionOptions::peak_search_nodes / peak_search_seconds.
struct Effort {
  int64_t nodes = kDefaultPeakSearchNodes;
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
