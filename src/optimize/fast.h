// optimize/fast.h — fast, the peak-limited search by priced min-cuts
// (PartitionOptions::PeakSearch kFast, and exact's incumbent).
//
// Contract:
//  * Each cut is a min-cut over the space (X_in -> X_out costs what saving X
//    is priced at, source -> X_in costs X's recompute estimate, dependencies
//    and "needed" are infinite): the plan minimizing recompute plus priced
//    saves. A saved view or alias is priced at its root's bytes (saving it
//    keeps the root's storage). Two pricings: one price per byte, first on
//    a grid of kPriceGrid + 1 prices (the model's peak is not monotone in
//    the price), then bisected between the cheapest grid price that fits
//    and the one below it; then, unless that found a fitting plan
//    recomputing nothing, one price per memory row (the rows' Lagrange
//    multipliers, projected subgradient steps), a saved value paying the
//    rows it lives in. A plan fits the targets when every model row (space.h
//    row_values) is within its row's target.
//  * A round keeps the cheapest plan whose model fits the targets and mixes
//    into it parts of the nearest plan over the targets and of the cheapest
//    plan the cuts found: the vars where the two differ, in components
//    joined where one reads another, each component taken (best recompute
//    saved per byte first) while the model fits. One price per byte makes
//    the same trade in every repeated layer; a mix makes it in some layers
//    only (at most kMixMoves components, best first). The mixed plans are
//    searched by builds (at most kMixBuilds, kSettleMisses in a row that
//    do not fit) for the last that fits: halved until a build fits, then
//    the last step the chained model puts within the limit less that
//    build's gap (simulated less chained peak), until none left is (the
//    gap holds nearly constant along one mix's steps; at the 60 limits of
//    docs/scale.md 197 -> 176 builds, two plans cheaper, the rest the
//    same); a step so chosen that does not fit turns the search back to
//    halving. Past the polish's spaces a step the chained model puts over
//    the limit is a miss without a build (Search::over_by_chained_model,
//    while chained_bounds() holds): the search takes the same path while
//    the model is a lower bound (at the 60 limits of docs/scale.md, when
//    added, every plan the same, 343 -> 253 builds). Then a local search:
//    each of the greedy_saves costliest recomputed values is
//    saved instead when the model still fits (the instants just before
//    backward nodes within the plain limit), or when recomputing one saved
//    value instead (among the swap_candidates largest) makes it fit for less.
//    Without a fitting plan the round takes the plan exceeding its targets
//    least. The plan is built (Search::evaluate) unless its model cost is not
//    below the best built plan's measured recompute (the model's cost is a
//    lower bound of the measured one), or unless it fits the targets and the
//    chained model puts it over the limit (Search::over_by_chained_model) on
//    a large space, or on a space past the polish's while that model has
//    equalled every build's peak (Search::chained_gap() 0): it cannot fit,
//    and the chained model's rows (space.h chained_rows) stand in for the
//    build's in the correction below and as its peak (at the 60 limits of
//    docs/scale.md, when added: 233 -> 224 builds, every plan the same or
//    cheaper; on
//    the ~2k-node stacks where that model misses a share of every build,
//    using it regardless cost transformer_1995 up to 16 builds instead of 5
//    and a worse plan). The search stops at a plan that fits,
//    and when a round's model-fitting plan builds to a peak no lower than
//    the previous such round's (the corrections are not closing in).
//  * A build that does not fit corrects what the model does not see
//    (recomputations' own intermediates, values alive until a recomputation
//    reads them): each row's target drops by what the simulation exceeded
//    the model there (correct()), and, when no plan fit the targets, the
//    kFastRepairMoves largest storages alive at its simulated peak change
//    sides for the rest of the search (recomputed -> saved, saved ->
//    recomputed; when none can, the search stops). A hazardous build only
//    forbids its saves (search.h). Then the round runs again, at most
//    FastEffort::rounds rounds.
//    Both narrow fast's search only: the space's vars are restored after it
//    (less the saves hazards forbade), so exact searches the whole space.
//  * Spaces of at most kPolishVars vars get kSmallSpaceEffort, those up to
//    kLargeSpaceVars kMidSpaceEffort (fewer bisection and row-price
//    steps); larger ones kLargeSpaceEffort (two rounds, fewer steps and
//    swaps), and there the torch_plans search (optimize/torch_plans.h)
//    runs first, screened and without its repair path: each of its builds
//    that does not fit corrects the targets as fast's own do, and the
//    rounds try to beat its plan. When none of torch's plans fits there,
//    the checkpointed plans
//    (optimize/checkpoint.h), and only when those fit nothing either the
//    torch_plans search with its repairs. Where torch's first pass built
//    nothing (the chained model put every candidate over the limit), the
//    repair path's start is built before the checkpointed plans
//    (torch_plans.h torch_repair_start; the pass with repairs takes it from
//    PeakCandidates' record): the checkpointed search sets aside the plans
//    the chained model puts over the limit and above the smallest peak
//    built, and without one it built them all (at moe_9923's and
//    moe_49603's tightest limits four and five plans, each peaking three
//    times the limit). At the 60 limits of docs/scale.md 205 -> 197 builds;
//    the checkpointed search's path changed at two limits of the
//    transformer stacks, each plan cheaper (transformer_9963 at 28.5 MiB
//    1.468e9 -> 1.302e9, transformer_49803 at 131.1 MiB 7.489e9 ->
//    5.031e9); the rest the same. A checkpointed plan that fits is
//    final: no round runs (the cuts price what plans save, not the long
//    recomputed chains that set these plans' peaks). So is, for the
//    rounds, a plan only the repair path reached: the limit lies below
//    every plan of torch's and every checkpointed one, and at the four
//    limits of docs/scale.md where that happened the rounds' cuts offered
//    no plan cheaper than it to build, for about a third of fast's time;
//    the last mix (below) still runs, from the cheapest cut alone. So is,
//    on any space, a plan recomputing nothing (Search::best_is_free): no
//    round, and none of the passes below, can replace it.
//  * Then, on the polish's spaces (optimize.h kPolishVars), the whole
//    torch_plans search runs, its plan replacing fast's when it recomputes
//    less or fast found none: fast is never worse than torch's plans. On
//    spaces past them up to kLargeSpaceVars, the same when fast found no
//    plan; with one, torch's plans run screened and without their repair
//    path (torch_plans.h: a candidate that could fit and recompute less is
//    still built), so fast is never worse than torch's own candidates, as on
//    large spaces. On either, when a build showed the screen's premise false
//    (Search::chained_bounds), the whole torch_plans search runs.
//  * Last, unless a checkpointed plan was final, the best plan (whichever
//    search found it) is mixed with the cheapest plan the rounds' cuts
//    found, against the targets as the builds corrected them, and the
//    mixed plans are bisected by builds as a round's are: torch's plans too
//    make one trade in every layer. (Against the plain limit the model let
//    through steps whose builds all went over: at transformer_49803's
//    loosest limit in docs/scale.md six builds, none fitting.)
//  * Every torch_plans pass of one search reads one candidate list
//    (memory/peak_budget.h PeakCandidates): each candidate is cut once (at
//    the tightest limits of the ~50k-node stacks the list was cut twice,
//    about a tenth of fast's time).
//  * fast only builds and offers plans (Search::best); it never throws for
//    an unreachable limit (the caller does, optimize.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "optimize/search.h"

namespace remat::optimize {

inline constexpr int kFastRounds = 6;
inline constexpr int kFastRepairMoves = 3;
inline constexpr int kPriceSteps = 20;
inline constexpr int kGreedySaves = 64;
inline constexpr int kSwapCandidates = 64;
inline constexpr int kBisectSteps = 8;
// uniform prices: the range of prices per byte (in units of byte_price) and
// the grid over it searched before the bisection.
inline constexpr double kLowPrice = 1e-6;
inline constexpr double kHighPrice = 1e6;
inline constexpr int kPriceGrid = 12;
// The most components mix() tries moving, best gain per byte first.
inline constexpr int kMixMoves = 256;
// The most builds that check mix()'s steps, and the most in a row that
// may miss (not fit) before the check stops: past three misses the steps
// left are the first eighth, and at the 60 limits of docs/scale.md a fourth
// build never found one that fit (369 -> 343 builds, every plan the same;
// stopping after two misses lost up to 2.4x recompute).
inline constexpr int kMixBuilds = 6;
inline constexpr int kSettleMisses = 3;

// How much fast searches: its rounds (builds), the per-byte price's
// bisection steps, the row prices' subgradient steps, the local search's
// saves and swap candidates. Spaces of more than kLargeSpaceVars vars (no
// polish follows there) get kLargeSpaceEffort, cut so that a 10^4-node
// graph stays within 5x a plain partition's time (bench/bench_memory.py's
// synthetic rows: each cut and each build there costs a sizeable fraction of
// a plain partition). Its second round runs only where the first one's plan
// did not fit once built: with one round, at transformer_9963's plain peak
// the cheapest cut's plan built 8 MB over its model (the forward computes
// whole backward chains only to save their last values, and the model keeps
// alive only what the saved values themselves read, not what the chains'
// earlier links read) and fast fell back to the plain plan (486), where the
// corrected second round finds 353; at three more of docs/scale.md's 20
// limits on the ~10k graphs it recomputes 1.5-6% less, at none more.
struct FastEffort {
  int rounds;
  int bisect_steps;
  int price_steps;
  int greedy_saves;
  int swap_candidates;
};
inline constexpr FastEffort kSmallSpaceEffort{kFastRounds, kBisectSteps, kPriceSteps, kGreedySaves,
                                              kSwapCandidates};
// Its 3 bisection steps (5 before) give the same plans and builds at the
// 40 limits of docs/scale.md on the ~10k- and ~50k-node graphs, 412 -> 348
// cuts; 2 change four plans, three for the worse (unet_49558 at 103.1 MiB
// 3082 -> 3172).
inline constexpr FastEffort kLargeSpaceEffort{2, 3, 4, 8, 8};
// Spaces past the polish's (optimize.h kPolishVars) up to kLargeSpaceVars:
// the small spaces' rounds and local search with 3 bisection steps and 6
// row-price steps (the small spaces' 8 and 20; these spaces had 8 and 8
// until the cuts, most of fast's time on the ~2k-node stacks at up to 55 a
// search, were cut). At the 20 limits of docs/scale.md on those graphs 3
// and 6 give the same recompute as 8 and 8 (one plan another of equal
// recompute: transformer_1995's tightest, 6.43 -> 6.46 MiB peak) with
// 511 -> 334 cuts; one step fewer of either loses (2 bisection steps:
// unet_2335 at 7.8 MiB 54 -> 61; 4 row steps: moe_1923's tightest 2% more
// recompute), and no bisection at all makes 4 of the 20 plans up to 6x
// worse.
inline constexpr FastEffort kMidSpaceEffort{kFastRounds, 3, 6, kGreedySaves, kSwapCandidates};

// Per row, the most its model value may be: the limit less what the
// simulation showed the model misses there (fast's correction).
using Targets = std::vector<int64_t>;

// Lowers each row's target by what the simulation of `saved` (v.rows)
// showed above the model there.
void correct(const PlanSpace& space, const std::vector<uint8_t>& saved, const Verdict& v, int64_t limit,
             Targets& targets);

// fast's search under s.limit(); its plan, if any, is s.best().
void fast(Search& s);

}  // namespace remat::optimize
