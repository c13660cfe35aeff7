// budget/pareto.cc — the Pareto sweep of memory budgets (its writers are
// remat/pareto.h). See pareto.h for the contract.
#include "budget/pareto.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "remat/error.h"

namespace remat {
namespace {

bool same_outcome(const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) {
  return a.recompute_runtime == b.recompute_runtime && a.memory_ratio == b.memory_ratio;
}

MemoryBudgetPoint evaluate_at(const BudgetEvaluator& evaluate, double budget) {
  const auto [runtime, ratio] = evaluate(budget);
  return {budget, runtime, ratio};
}

}  // namespace

std::vector<MemoryBudgetPoint> pareto_sweep(const BudgetEvaluator& evaluate, double resolution,
                                            const SweepProgress& progress) {
  if (!evaluate) throw Error(ErrorCode::kInvalidOption, "pareto_sweep: no evaluator");
  if (!(resolution > 0)) {
    throw Error(ErrorCode::kInvalidOption,
                fmt::format("pareto_sweep: resolution is {} (must be > 0)", resolution));
  }
  // Progress is the width of budget space whose outcome is known: an
  // interval is settled when it is narrow enough or its ends agree.
  double settled = 0;
  auto report = [&](double width) {
    settled += width;
    if (progress) progress("pareto", std::min(settled, 1.0));
  };
  std::vector<MemoryBudgetPoint> points{evaluate_at(evaluate, 0.0), evaluate_at(evaluate, 1.0)};
  if (!same_outcome(points[0], points[1])) {
    // Intervals whose ends differ; a stack, as torch's list.pop().
    std::vector<std::pair<MemoryBudgetPoint, MemoryBudgetPoint>> pending{{points[0], points[1]}};
    while (!pending.empty()) {
      const auto [lhs, rhs] = pending.back();
      pending.pop_back();
      // An interval also ends when its midpoint rounds to one of its ends
      // (adjacent doubles): splitting it would give back the same interval
      // forever, as torch does for a resolution below the spacing of doubles
      // near a change (1e-16 around 0.5).
      const double middle = (lhs.budget + rhs.budget) / 2;
      if (rhs.budget - lhs.budget < resolution || !(lhs.budget < middle && middle < rhs.budget)) {
        points.push_back(lhs);
        points.push_back(rhs);
        report(rhs.budget - lhs.budget);
        continue;
      }
      const MemoryBudgetPoint mid = evaluate_at(evaluate, middle);
      if (!same_outcome(mid, lhs)) pending.emplace_back(lhs, mid);
      else report(mid.budget - lhs.budget);
      if (!same_outcome(mid, rhs)) pending.emplace_back(mid, rhs);
      else report(rhs.budget - mid.budget);
    }
  }
  if (progress) progress("pareto", 1.0);
  std::sort(points.begin(), points.end(), [](const MemoryBudgetPoint& a, const MemoryBudgetPoint& b) {
    return std::tie(a.budget, a.recompute_runtime, a.memory_ratio) <
           std::tie(b.budget, b.recompute_runtime, b.memory_ratio);
  });
  return points;
}

}  // namespace remat
