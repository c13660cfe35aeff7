// budget/pareto.h — stage 3 (decide, memory budget), reporting: the
// budget / recompute-runtime trade-off curve torch draws when
// config.visualize_memory_budget_pareto is set.
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
// The writers are deterministic: same points, same bytes.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace remat {

struct ParetoPoint {
  double budget = 0;             // the memory budget asked for
  double recompute_runtime = 0;  // runtime of what is recomputed at that budget
  double memory_ratio = 0;       // saved activation memory, 0 = inputs only, 1 = min-cut
};

// budget -> (recompute runtime, memory ratio) of the partition chosen at it.
using BudgetEvaluator = std::function<std::pair<double, double>(double budget)>;

// Told the fraction of [0, 1] whose outcome is settled, after each
// evaluation (never decreasing; 1 at the end).
using SweepProgress = std::function<void(std::string_view task, double fraction)>;

// `progress` (may be null) is called with task "pareto".
std::vector<ParetoPoint> pareto_sweep(const BudgetEvaluator& evaluate,
                                      double resolution = 1e-3,
                                      const SweepProgress& progress = nullptr);

// "budget,recompute_runtime,memory_ratio" then one row per point.
std::string pareto_csv(const std::vector<ParetoPoint>& points);
// {"points": [{"budget": .., "recompute_runtime": .., "memory_ratio": ..}, ...]}
std::string pareto_json(const std::vector<ParetoPoint>& points);
// A standalone SVG line chart: memory ratio (x) against recompute runtime
// (y), each point labelled with its ratio, as torch's matplotlib figure.
std::string pareto_svg(const std::vector<ParetoPoint>& points,
                       std::string_view title =
                           "Pareto Frontier of Memory Budget vs. Recomputation Runtime");

}  // namespace remat
