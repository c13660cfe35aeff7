// optimize/torch_plans.h — the torch_plans search inside fast
// (optimize/fast.h): torch's own plans under the peak limit, counted and
// measured as the optimizer's own builds.
//
// Contract:
//  * torch_plans(s, targets, repairs) runs memory/peak_budget.h's
//    solve_peak_budget (torch's own plans over kPeakSearchBudgets, then,
//    with `repairs`, its repair path) under s.limit(), each build through
//    Search::build_unkeyed (counted, its peak recorded when it has no
//    hazard). Its plan, which fits, is offered (Search::offer): it becomes
//    best() when it recomputes less or none was found. A limit it reaches
//    with none of its plans leaves best() as it was; other errors propagate.
//  * Without `repairs`, candidates the chained model (space.h chained_peak)
//    puts over the limit are set aside unbuilt, and the search is marked
//    screened (Search::screen_with_chained_model), so later builds check
//    that premise (Search::chained_bounds). With a best() already, so are
//    candidates whose model cost (implied_recompute, a lower bound of the
//    measured one) is at least its recompute: they cannot replace it.
//  * With `repairs`, on spaces past kPolishVars and while chained_bounds()
//    holds, the same model screens (memory/peak_budget.h `bound`) the
//    candidates that could start the repair path and the path's moves, and
//    the search is marked screened: the path is the same while the model is
//    a lower bound, and a build that shows it is not makes fast run the
//    whole search again (fast.h).
//  * `candidates`, when given, keeps torch's candidate list between passes
//    (memory/peak_budget.h PeakCandidates; fast passes one for its search):
//    each candidate is cut once.
//  * `targets`, when given, is corrected (fast.h correct) by each
//    hazard-free plan it builds over the limit, as fast's own builds are.
//  * Why it runs at all: the cuts' model misses what long recomputed chains
//    keep alive, so on deep graphs torch's plans can be far cheaper than
//    fast's (a 10^4-node residual MLP near its default peak had fast
//    recompute its matmuls, 1.7e10, where torch's aggressive tier fits
//    recomputing pointwise ops, about 2e3).
#pragma once

#include "memory/peak_budget.h"
#include "optimize/fast.h"
#include "optimize/search.h"

namespace remat::optimize {

void torch_plans(Search& s, Targets* targets, bool repairs = true, PeakCandidates* candidates = nullptr);

// The start of the repair path torch_plans with repairs would take
// (memory/peak_budget.h build_repair_start, screened by the chained model
// while chained_bounds() holds; nothing otherwise, nor without
// `candidates`, whose record keeps it for that later pass). A candidate
// that fits on the way is offered.
void torch_repair_start(Search& s, Targets* targets, PeakCandidates* candidates);

}  // namespace remat::optimize
