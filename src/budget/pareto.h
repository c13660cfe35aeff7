// budget/pareto.h — stage 3 (decide, memory budget): the budget /
// recompute-runtime trade-off curve torch draws when
// config.visualize_memory_budget_pareto is set. Its writers (CSV, JSON,
// SVG) are remat/pareto.h.
//
// Contract: pareto_sweep evaluates budgets exactly as torch's bisection does
// (0 and 1 first; an interval is split at its midpoint while its ends differ
// in (runtime, ratio) and it is at least `resolution` wide; intervals are
// taken from a stack, last in first out) and returns the points as torch's
// `options` list: both ends of every finished interval, duplicates included,
// sorted by (budget, runtime, ratio). Unlike torch it always terminates: an
// interval whose midpoint rounds to one of its ends (adjacent doubles) is
// finished whatever the resolution, so a resolution of 1e-300 costs at most
// about 1100 evaluations per change of outcome instead of looping forever.
// A point is remat/partition.h's MemoryBudgetPoint, the type every caller
// receives.
#pragma once

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "remat/partition.h"

namespace remat {

// budget -> (recompute runtime, memory ratio) of the partition chosen at it.
using BudgetEvaluator = std::function<std::pair<double, double>(double budget)>;

// Told the fraction of [0, 1] whose outcome is settled, after each
// evaluation (never decreasing; 1 at the end).
using SweepProgress = std::function<void(std::string_view task, double fraction)>;

// `progress` (may be null) is called with task "pareto".
std::vector<MemoryBudgetPoint> pareto_sweep(const BudgetEvaluator& evaluate,
                                            double resolution = 1e-3,
                                            const SweepProgress& progress = nullptr);

}  // namespace remat
