// optimize/exact.h — exact, the peak-limited search by a MILP
// (PartitionOptions::PeakSearch kExact), the smallest-peak search, and
// fast's polish on small spaces (both run from optimize.cc).
//
// Contract:
//  * The program (optimize/milp.h): binaries s (saved) and r (recomputed)
//    per var, minimize sum(cost * r) plus a tie-break toward fewer saved
//    bytes worth kTieBreak of the cheapest cost at most, subject to the
//    space's validity rules (space.h: a needed var saved or recomputed, a
//    recomputed var's deps saved or recomputed, nothing both, and a var not
//    needed saved or recomputed only when a recomputation reads it, so r is
//    implied_recompute of s and each solution is one plan) and its memory
//    rows <= the limit (rows that can never exceed it left out).
//  * Lazy memory rows (MemoryRows below; by default on spaces of more than
//    kLazyMemoryVars vars, where the memory rows hold most of the
//    program's nonzeros: 3.7k rows of ~900 terms on a 10^4-node transformer
//    stack, whose root LP took minutes): the program starts with the
//    return's row only. Before the branch and bound, at most kLazyLpRounds
//    rounds solve its linear relaxation (Milp::relax) and add the
//    kLazyMemoryRows missing rows its solution exceeds most (each
//    auxiliary column at the least value its rows allow); then each MILP
//    solution whose model exceeds a missing row gets the kLazyMemoryRows
//    it exceeds most, and is solved again before any other cut. Any subset
//    of the rows is a relaxation, so every bound stays proven; only while
//    the model is a bound (else every row is added at once).
//  * Lazy rows: the rows relax two terms of the model (a saved value, or the
//    storage a saved or recomputed view of it holds, kept alive in the
//    backward by a recomputed user made later; a value kept alive in the
//    forward by a saved user the forward computes only to save it). A
//    solution whose model (space.h row_values) exceeds the limit is not
//    built: its kLazyRows most exceeding rows (forward or backward) are
//    added with those terms, linearized exactly for integral plans, and the
//    MILP solved again. Only while the model is a bound (space.h
//    model_is_bound, Search::model_bounds), and once per saved set.
//  * exact(s, stall): the incumbent is s.best() when there is one, and the
//    program then admits only plans whose model cost is at most its measured
//    recompute. Each solution the model lets through is built
//    (Search::evaluate); one that does not fit is cut off by a no-good cut
//    on its saved set (a hazardous one by its forbidden save) and the MILP
//    solved again, one Search::solve round each, until the rounds or the
//    solver nodes are spent (or the caller's time safety net), or, once a
//    plan fits, `stall` builds in a row found no cheaper fitting plan
//    (without one, every build is a step toward one: the dropout MLP of
//    tests/data fits at 90% of its plain peak after 37 builds, where a
//    stall of kPolishStallRounds gave up). The first solution that fits stops the search; it is optimal when
//    the solver proved optimality, its measured recompute is within the
//    solver's bound, and the model bounded every built plan's peak from
//    below (checked each time). An infeasible program proves the incumbent
//    optimal, and so does a proven bound that reaches its recompute. An
//    incumbent recomputing nothing is optimal at once (bound 0, no solve),
//    whether or not the model bounds the peak.
//    Returns the Proof: the solver's bound less the tie-break (-1 when a
//    built plan broke the model's bound: nothing is proven).
//  * smallest_peak_bound(s, until_fits, stall): the same program minimizing
//    a peak variable that every memory row bounds, its solutions cut by
//    lazy rows against their own peak and by no-good cuts, each built;
//    stops when the bound reaches the smallest built peak (proven smallest),
//    after `stall` builds in a row found no smaller peak, with `until_fits`
//    at the first plan that fits (then s.best()), or when the rounds or
//    solver nodes are spent. Returns a proven lower bound of any valid plan's peak (at
//    most the smallest built one; Search::fast_peak_bound when the model is
//    not a bound).
//  * fast's polish (optimize.cc, spaces of at most kPolishVars vars; the
//    smallest-peak search's first program and every program of exact's of
//    at most kPolishSize rows plus columns): when
//    fast found no plan, smallest_peak_bound until one fits, at most
//    kPolishRounds rounds and kPolishNodes nodes, stalling after
//    kStallRounds; unless its bound proves the limit unreachable, then exact
//    (from the plan, when there is one), at most kPolishRounds rounds
//    and kPolishNodes nodes, stalling after kPolishStallRounds. Rounds and
//    nodes, not seconds, so the answer does not depend on the machine; it
//    only ever replaces the plan by a verified cheaper one.
#pragma once

#include <cstdint>
#include <limits>

#include "optimize/search.h"

namespace remat::optimize {

inline constexpr int kStallRounds = 25;
inline constexpr int kPolishRounds = 60;
// fast's polish stops after this many built plans in a row that were no
// cheaper: on lstm_unrolled at three limits between its smallest peak and
// its plain one, 25 (until 2026-12-07) ran 28 rounds and 21-25 s for the
// same plans (recompute 1549) as 5 finds in 8 rounds and 3-5 s.
inline constexpr int kPolishStallRounds = 5;
// The objective's tie-break toward fewer saved bytes, in total, as a
// fraction of the cheapest recomputation: it never outweighs recompute.
inline constexpr double kTieBreak = 1e-4;
// Per MILP solution the model rejects, the most exceeding rows added back
// with the terms the MILP's rows relax (exact's lazy rows).
inline constexpr int kLazyRows = 4;
// Per MILP solution, the most exceeding memory rows the program lacks added
// (lazy memory rows).
inline constexpr int kLazyMemoryRows = 32;
// The relaxation's rounds of lazy memory rows before the branch and bound.
inline constexpr int kLazyLpRounds = 30;

// Which memory rows a program starts with: all of them, or none (kLazy:
// added as the relaxation and the solutions exceed them, see the
// contract). kAuto: kLazy on spaces of more than kLazyMemoryVars vars.
enum class MemoryRows : uint8_t { kAuto, kAll, kLazy };
// The polish's spaces keep every row: their programs are small, and lazy
// rows' extra solves would spend its few rounds.
inline constexpr int kLazyMemoryVars = kPolishVars;

Proof exact(Search& s, int stall = std::numeric_limits<int>::max(), MemoryRows rows = MemoryRows::kAuto);
int64_t smallest_peak_bound(Search& s, bool until_fits = false, int stall = kStallRounds,
                            MemoryRows rows = MemoryRows::kAuto);

}  // namespace remat::optimize
